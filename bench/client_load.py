"""The load scenario: BENCH_LOAD_CONNECTIONS clients (64) posting for BENCH_LOAD_SECONDS.

What must hold under many more clients than processes: no errors, PostgreSQL backends
within the web budget, and a p99 not far above the bare view's at the same load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.config import LOAD_P99_TARGET
from bench.places import BackendSampler
from bench.report import ratio, verdict

if TYPE_CHECKING:  # bench.runner imports the scenarios to run them
    from bench.runner import Bench


def scenario_load(
    bench: Bench, ports: tuple[int, int], budget_web: int, budget_all: int, limit: int
) -> None:
    """One long run of the real intake (sampling backends), then one of the bare view on
    its own server. `ports`: (the bare baselines' server, the server under test)."""
    c, seconds = bench.config.load_connections, bench.config.load_seconds
    bare, real = bench.intake_loads()
    bare_port, port = ports
    with BackendSampler(bench.places, app="bench:web") as sampler:
        subject = bench.wrk(port, real, c, seconds)
    base = bench.wrk(bare_port, bare, c, seconds)
    p99 = ratio(subject.p99_ms, base.p99_ms)
    print(
        f"load {c} clients {seconds:.0f} s: non-202 answers {subject.unexpected} of "
        f"{subject.requests} (socket errors {subject.socket_errors}; must be 0); "
        f"{subject.rps:.0f} req/s"
    )
    print(
        f"load {c} clients: peak PostgreSQL backends {sampler.peak} "
        f"(budget: web {budget_web}, whole Procfile {budget_all}, "
        f"max_connections {limit}; {'within' if sampler.peak <= budget_web else 'OVER'} "
        "the web budget)"
    )
    print(
        f"load {c} clients: p99 {p99:.3g}x bare ({subject.p99_ms:.1f} vs "
        f"{base.p99_ms:.1f} ms, max {subject.max_ms:.0f} ms; "
        f"{verdict(p99, LOAD_P99_TARGET, at_least=False)})"
    )
    if base.unexpected or base.socket_errors:
        print(f"load: the bare view failed {base.unexpected + base.socket_errors} requests")
