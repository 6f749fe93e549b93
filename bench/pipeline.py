"""S2: events drained by the worker (inapp + email to an SMTP sink) vs no-op tasks.

Both are preloaded with the worker stopped, then timed from the worker's start (the same
command, scripts/worker.sh) until done, BENCH_RUNS times each, alternating; the timing
itself is in bench/pipeline_drains.py.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.config import SMALL_POOL_DEFAULT, env_int
from bench.pipeline_drains import Drain, noop_run, pipeline_run
from bench.processes import start_smtp_sink
from bench.report import ratio, verdict

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench


def scenario_s2(bench: Bench) -> None:
    """Time BENCH_EVENTS events and as many no-op tasks, BENCH_RUNS times; print ratios,
    SQL statements per event and the peak PostgreSQL backends."""
    from django.core.management import get_commands

    n = bench.config.events
    sink, worker_env = start_smtp_sink(bench.stack, bench.env)
    has_relay = "outbox_relay" in get_commands()
    noops: list[Drain] = []
    pipelines: list[Drain] = []
    intake_sql: float | None = None
    for run in range(bench.config.runs):
        noops.append(noop_run(bench, worker_env, n))
        drain, sql_intake = pipeline_run(bench, worker_env, n, has_relay, count_intake=run == 0)
        pipelines.append(drain)
        intake_sql = sql_intake if sql_intake is not None else intake_sql
    bench.stack.stop(sink)

    pipe_rate = statistics.median(d.rate for d in pipelines)
    noop_rate = statistics.median(d.rate for d in noops)
    value = ratio(pipe_rate, noop_rate)
    relay_note = "worker + outbox_relay" if has_relay else "worker alone (no outbox_relay yet)"
    print(
        f"S2 pipeline: {value:.3g}x no-op ({pipe_rate:.0f} events/s, inapp + email to an "
        f"SMTP sink, {n} events over {bench.config.event_recipients} recipient(s), vs "
        f"{noop_rate:.0f} no-op tasks/s; {n} each, timed from worker start; "
        f"{relay_note}; {verdict(value, 0.12, at_least=True)})"
    )
    # The no-op run is short, so the worker's start-up weighs more on it: the same
    # figure without it shows the steady drain rates.
    if all(d.drain_rate for d in pipelines + noops):
        pipe_drain = statistics.median(d.drain_rate or 0 for d in pipelines)
        noop_drain = statistics.median(d.drain_rate or 0 for d in noops)
        print(
            f"S2 pipeline after worker start-up: {ratio(pipe_drain, noop_drain):.3g}x "
            f"({pipe_drain:.0f} events/s vs {noop_drain:.0f} tasks/s; start-up "
            f"{statistics.median(d.startup or 0 for d in pipelines):.1f} s and "
            f"{statistics.median(d.startup or 0 for d in noops):.1f} s)"
        )
    parts = []
    if intake_sql is not None:
        parts.append(f"intake {intake_sql:.1f} (in-process API)")
    counted = [d.statements / n for d in pipelines if d.statements]
    if counted:
        parts.append(f"worker{' + relay' if has_relay else ''} {statistics.median(counted):.1f}")
    if parts:
        print(f"S2 SQL statements per event: {', '.join(parts)}")
    worker_pool = env_int("DATABASE_POOL_MAX_SIZE", env_int("WORKER_CONCURRENCY", 8) + 2)
    budget = worker_pool + (SMALL_POOL_DEFAULT + 1 if has_relay else 0)
    print(
        f"S2 peak PostgreSQL backends: {max(d.peak_backends for d in pipelines)} (budget "
        f"{budget}: worker pool {worker_pool}"
        + (f" + relay pool {SMALL_POOL_DEFAULT} + its LISTEN connection" if has_relay else "")
        + "; the bench's own progress query adds 1)"
    )
