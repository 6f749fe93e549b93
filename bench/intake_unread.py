"""S1 (POST /v1/notifications) and S5 (GET unread-count): each a ratio to a bare view.

Baseline and subject run alternately, BENCH_RUNS times each after a warm-up, so a noisy
neighbour hits both; the figures are medians.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.config import DEMO_USER, S1_P99_TARGET, S1_TARGET, S5_TARGET
from bench.places import BackendSampler
from bench.report import median_of, ratio, report_unexpected, verdict
from bench.wrk import Load, LoadResult

if TYPE_CHECKING:  # bench.runner imports the scenarios to run them
    from bench.runner import Bench


def alternate(
    bench: Bench, ports: tuple[int, int], baseline: Load, subject: Load, connections: int
) -> tuple[list[LoadResult], list[LoadResult]]:
    """Warm both up, then baseline/subject alternately, BENCH_RUNS times each. `ports`:
    (the bare baselines' server, the server under test)."""
    bare_port, port = ports
    bench.wrk(bare_port, baseline, connections, bench.config.warmup_seconds)
    bench.wrk(port, subject, connections, bench.config.warmup_seconds)
    bases: list[LoadResult] = []
    subjects: list[LoadResult] = []
    for _ in range(bench.config.runs):
        bases.append(bench.wrk(bare_port, baseline, connections, bench.config.seconds))
        subjects.append(bench.wrk(port, subject, connections, bench.config.seconds))
    return bases, subjects


def scenario_s1(bench: Bench, ports: tuple[int, int], label: str = "S1") -> int:
    """S1 intake throughput and p99 vs the bare intake view; returns the peak backends of
    the server under test."""
    c = bench.config.connections
    with BackendSampler(bench.places, app="bench:web") as sampler:
        bases, subjects = alternate(bench, ports, *bench.intake_loads(), connections=c)
    tp = ratio(median_of(subjects, lambda r: r.rps), median_of(bases, lambda r: r.rps))
    p99 = ratio(median_of(subjects, lambda r: r.p99_ms), median_of(bases, lambda r: r.p99_ms))
    print(
        f"{label} intake throughput: {tp:.3g}x bare "
        f"({median_of(subjects, lambda r: r.rps):.0f} vs "
        f"{median_of(bases, lambda r: r.rps):.0f} req/s at {c} connections; "
        f"{verdict(tp, S1_TARGET, at_least=True)})"
    )
    print(
        f"{label} intake p99: {p99:.3g}x bare "
        f"({median_of(subjects, lambda r: r.p99_ms):.1f} vs "
        f"{median_of(bases, lambda r: r.p99_ms):.1f} ms; "
        f"{verdict(p99, S1_P99_TARGET, at_least=False)})"
    )
    report_unexpected(label, subjects + bases, 202)
    return sampler.peak


def scenario_s5(bench: Bench, ports: tuple[int, int], label: str = "S5") -> int:
    """S5 unread-count throughput vs a bare view reading one Redis key; returns the peak
    backends."""
    c = bench.config.connections
    bare = Load("GET", f"/bench/bare-unread/{DEMO_USER}", 200)
    real = Load("GET", f"/v1/users/{DEMO_USER}/unread-count", 200, api_key=bench.api_key)
    with BackendSampler(bench.places, app="bench:web") as sampler:
        bases, subjects = alternate(bench, ports, bare, real, connections=c)
    tp = ratio(median_of(subjects, lambda r: r.rps), median_of(bases, lambda r: r.rps))
    print(
        f"{label} unread count throughput: {tp:.3g}x bare "
        f"({median_of(subjects, lambda r: r.rps):.0f} vs "
        f"{median_of(bases, lambda r: r.rps):.0f} req/s at {c} connections; "
        f"p99 {median_of(subjects, lambda r: r.p99_ms):.1f} vs "
        f"{median_of(bases, lambda r: r.p99_ms):.1f} ms; "
        f"{verdict(tp, S5_TARGET, at_least=True)})"
    )
    report_unexpected(label, subjects + bases, 200)
    return sampler.peak
