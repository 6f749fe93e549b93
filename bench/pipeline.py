"""S2: events drained by the worker (inapp + email to an SMTP sink) vs no-op tasks.

Both are preloaded with the worker stopped, then the worker is started (the same
command, scripts/worker.sh) and timed from its first message: the pipeline from its
first routed event to its last delivery final, the no-op drain from its first task to
its last. Worker start-up is printed on a line of its own, never inside the ratio.
BENCH_RUNS times each, alternating; the timing itself is in bench/pipeline_drains.py.
With analytics on, the analytics shipper runs beside the worker, as deployed, and each
drain is followed by its twin with analytics off (no events written, no shipper), for
the on / off ratio (BENCH_S2_ANALYTICS_OFF=0 leaves the twins out); the twins take turns
going first, over an even number of runs (BENCH_RUNS rounded up).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.analytics_lag import ANALYTICS_OFF, S2_STORE_DIR, queue_shipped, store_env
from bench.config import (
    ANALYTICS_TARGET,
    S2_SQL_TARGET,
    S2_TARGET,
    SMALL_POOL_DEFAULT,
    env_int,
)
from bench.costs import costs_text, median_costs
from bench.noop_drain import noop_run
from bench.pipeline_drains import Drain, pipeline_run, worker_cpu_line
from bench.processes import procfile_entries, start_smtp_sink
from bench.report import ratio, twin_runs, verdict

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench


def scenario_s2(bench: Bench) -> None:
    """Time BENCH_EVENTS events and as many no-op tasks, BENCH_RUNS times; print the
    ratio, the start-ups, the costs per notification and the peak PostgreSQL backends."""
    from django.conf import settings
    from django.core.management import get_commands
    from django.test import override_settings

    n = bench.config.events
    sink, worker_env = start_smtp_sink(bench.stack, bench.env)
    has_relay = "outbox_relay" in get_commands()
    analytics = bool(settings.NOTIFY_ANALYTICS_ENABLED) and "analytics_ship" in get_commands()
    shipper = dict(procfile_entries(("analytics",)))["analytics"] if analytics else []
    noops: list[Drain] = []
    pipelines: list[Drain] = []
    offs: list[Drain] = []
    twins = analytics and bench.config.s2_analytics_off

    def on() -> None:
        beside = (("analytics", shipper, store_env(S2_STORE_DIR)),) if analytics else ()
        ready = queue_shipped if analytics else None
        pipelines.append(
            pipeline_run(bench, worker_env, n, has_relay, beside=beside, beside_ready=ready)
        )

    def off() -> None:
        with override_settings(NOTIFY_ANALYTICS_ENABLED=False):
            off_env = {**worker_env, **ANALYTICS_OFF}
            offs.append(pipeline_run(bench, off_env, n, has_relay, label="S2-off"))

    for run in range(twin_runs(bench.config.runs, twins=twins)):
        noops.append(noop_run(bench, worker_env, n))
        # Twins take turns going first, so that neither has the place after the no-op
        # drain (or the other's leftovers) every time.
        for drain in ((on, off) if run % 2 == 0 else (off, on)) if twins else (on,):
            drain()
    bench.stack.stop(sink)

    pipe_rate = statistics.median(d.rate for d in pipelines)
    noop_rate = statistics.median(d.rate for d in noops)
    value = ratio(pipe_rate, noop_rate)
    relay_note = "worker + outbox_relay" if has_relay else "worker alone (no outbox_relay yet)"
    relay_note += " + analytics" if analytics else ""
    print(
        f"S2 pipeline: {value:.3g}x no-op ({pipe_rate:.0f} events/s, inapp + email to an "
        f"SMTP sink, {n} events over {bench.config.event_recipients} recipient(s), from "
        f"the first routed event to the last delivery final, vs {noop_rate:.0f} no-op "
        f"tasks/s from the first task to the last; {relay_note}; "
        f"{verdict(value, S2_TARGET, at_least=True)})"
    )
    print(
        f"S2 worker start-up (not in the ratio): worker start -> first routed event "
        f"{statistics.median(d.startup for d in pipelines):.1f} s, -> first no-op task "
        f"{statistics.median(d.startup for d in noops):.1f} s; of which to Celery's "
        f"worker_ready {median_or_nan([d.ready_after for d in pipelines]):.1f} s and "
        f"{median_or_nan([d.ready_after for d in noops]):.1f} s"
    )
    costs = [d.costs for d in pipelines if d.costs]
    intakes = [d.intake for d in pipelines if d.intake]
    if costs and intakes:
        total, intake = median_costs(costs), median_costs(intakes)
        print(
            f"S2 per notification (end to end: intake + {relay_note}): "
            + costs_text(total, sql_target=S2_SQL_TARGET)
            + f"; of which the intake (in-process API): {costs_text(intake)}"
        )
    if line := worker_cpu_line("S2", "notification", pipelines):
        print(line)
    if offs:
        analytics_lines(pipelines, offs, noop_rate)
    worker_pool = env_int("DATABASE_POOL_MAX_SIZE", env_int("WORKER_CONCURRENCY", 8) + 2)
    budget = worker_pool + (SMALL_POOL_DEFAULT + 1 if has_relay else 0)
    budget += SMALL_POOL_DEFAULT if analytics else 0
    print(
        f"S2 peak PostgreSQL backends: {max(d.peak_backends for d in pipelines)} (budget "
        f"{budget}: worker pool {worker_pool}"
        + (f" + relay pool {SMALL_POOL_DEFAULT} + its LISTEN connection" if has_relay else "")
        + (f" + analytics pool {SMALL_POOL_DEFAULT}" if analytics else "")
        + "; the bench's own progress query adds 1)"
    )


def analytics_lines(ons: list[Drain], offs: list[Drain], noop_rate: float) -> None:
    """Print S2 with analytics off and on / off, on the medians and pair by pair (each
    drain with analytics on and its twin, run back to back, taking turns to go first)."""
    off_rate = statistics.median(d.rate for d in offs)
    on_off = ratio(statistics.median(d.rate for d in ons), off_rate)
    pairs = ", ".join(f"{ratio(on.rate, off.rate):.3f}" for on, off in zip(ons, offs, strict=True))
    costs = [d.costs for d in offs if d.costs]
    print(
        f"S2 with analytics off (NOTIFY_ANALYTICS_ENABLED=0, no shipper; each drain beside "
        f"its analytics-on twin, the two taking turns to go first): "
        f"{ratio(off_rate, noop_rate):.3g}x no-op ({off_rate:.0f} events/s)"
        + (f"; {costs_text(median_costs(costs))}" if costs else "")
    )
    print(
        f"S2 analytics on / off: {on_off:.3f} on the medians; pair by pair {pairs} "
        f"({verdict(on_off, ANALYTICS_TARGET, at_least=True)})"
    )
    on_cpu, off_cpu = _drain_cpu(ons), _drain_cpu(offs)
    if on_cpu and off_cpu:
        print(
            "S2 CPU per event over the drain, ms (medians; worker + relay and shipper + "
            f"database): analytics on {_cpu_text(on_cpu)}, off {_cpu_text(off_cpu)}; "
            f"off / on {sum(off_cpu) / sum(on_cpu):.3f} (what analytics costs in CPU, for "
            "reading, not the target: on a shared machine it moves as much as the rates)"
        )


def _drain_cpu(drains: list[Drain]) -> tuple[float, float, float] | None:
    """Per event (ms, medians): the worker's CPU, the other processes', and the database
    backends' over the drain (the intake's left out)."""
    measured = [
        d for d in drains if d.worker_cpu is not None and d.others_cpu is not None and d.costs
    ]
    if not measured:
        return None

    def each(seconds: Callable[[Drain], float]) -> float:
        return statistics.median(seconds(d) * 1000 / d.n for d in measured)

    return (
        each(lambda d: d.worker_cpu or 0.0),
        each(lambda d: d.others_cpu or 0.0),
        each(lambda d: d.costs.pg_cpu - (d.intake.pg_cpu if d.intake else 0.0)),
    )


def _cpu_text(cpu: tuple[float, float, float]) -> str:
    worker, others, database = cpu
    return f"{sum(cpu):.2f} ({worker:.2f} + {others:.2f} + {database:.2f})"


def median_or_nan(values: list[float | None]) -> float:
    """The median of the values that were measured; NaN when none was."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else float("nan")
