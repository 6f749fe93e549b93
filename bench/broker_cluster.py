"""cluster: the pipeline on a 3-node RabbitMQ cluster with quorum queues, beside the
single broker node with the shipped default (classic queues), in the same run.

The cluster is booted on loopback by scripts/rabbit_cluster.py (the tests' harness: its
own nodes, ports, data and cookie; the machine's node is not touched); its start-up is
printed on a line of its own, never inside a ratio. Then, the two alternating so a noisy
neighbour hits both:

- intake: POST /v1/notifications with wrk against two scripts/web.sh, one configured for
  each broker (intake writes PostgreSQL only, so this shows it does not depend on it);
- drain: BENCH_EVENTS events preloaded, then the worker and the outbox relay started
  and timed from the first routed event to the last delivery final (S2's drain);
- no-op: as many no-op tasks drained by the worker, from its first task to its last
  (what the broker itself costs per message, consume and ack).

Each is printed as cluster / single node. Also: what PostgreSQL keeps per notification
(tables and indexes after a drain, less the same tables empty).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.config import BenchError
from bench.noop_drain import noop_run
from bench.pipeline_drains import Drain, pipeline_run
from bench.processes import start_smtp_sink
from bench.report import median_of, phase, ratio, report_unexpected
from bench.web_scenarios import start_web
from bench.wrk import LoadResult
from scripts.rabbit_cluster import RabbitCluster

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench

BROKERS = ("single", "cluster")
# Run in the cluster's environment before anything publishes: the quorum queues, the
# exchanges and native delayed delivery's topology (a worker would declare them too,
# but the relay may publish first).
DECLARE = "from notify.broker import declare_topology; declare_topology()"


def scenario_cluster(bench: Bench) -> None:
    """Boot the cluster, measure intake and drains on both brokers, print the ratios."""
    from bench.runner import manage

    cluster = RabbitCluster()
    try:
        with phase("booting a 3-node RabbitMQ cluster on loopback"):
            try:
                cluster.start()
            except RuntimeError as error:
                raise BenchError(f"the cluster did not start: {error}") from error
        print(
            f"cluster start-up (not in any ratio): 3 nodes booted in "
            f"{cluster.timings['boot']:.1f} s, clustered after {cluster.timings['start']:.1f} s"
        )
        sink, single_env = start_smtp_sink(bench.stack, bench.env)
        urls = {"single": None, "cluster": cluster.urls()}
        envs = {
            "single": single_env,
            "cluster": {
                **single_env,
                "CELERY_BROKER_URL": cluster.urls(),
                "NOTIFY_QUEUE_TYPE": "quorum",
            },
        }
        manage(envs["cluster"], "shell", "-c", DECLARE)
        with phase("cluster: intake on each broker's web"):
            intakes = measure_intake(bench, envs)
        with phase(f"cluster: drains of {bench.config.events} events on each broker"):
            drains, noops, kept = measure_drains(bench, envs, urls)
        bench.stack.stop(sink)
    finally:
        cluster.stop()
    report(bench, intakes, drains, noops, kept)


def measure_intake(bench: Bench, envs: dict[str, dict[str, str]]) -> dict[str, list[LoadResult]]:
    """wrk POSTs against each broker's web process, alternating, BENCH_RUNS times each."""
    _, real = bench.intake_loads()
    c = bench.config.connections
    webs = {name: start_web(bench, envs[name], name=f"web-{name}") for name in BROKERS}
    try:
        for _, port in webs.values():
            bench.wrk(port, real, c, bench.config.warmup_seconds)
        results: dict[str, list[LoadResult]] = {name: [] for name in BROKERS}
        for _ in range(bench.config.runs):
            for name, (_, port) in webs.items():
                results[name].append(bench.wrk(port, real, c, bench.config.seconds))
    finally:
        for web, _ in webs.values():
            bench.stack.stop(web)
    return results


def measure_drains(
    bench: Bench, envs: dict[str, dict[str, str]], urls: dict[str, str | None]
) -> tuple[dict[str, list[Drain]], dict[str, list[Drain]], list[float]]:
    """No-op and pipeline drains on each broker, alternating; and the bytes PostgreSQL
    keeps per notification, after each single-node pipeline drain."""
    n = bench.config.events
    drains: dict[str, list[Drain]] = {name: [] for name in BROKERS}
    noops: dict[str, list[Drain]] = {name: [] for name in BROKERS}
    kept: list[float] = []
    for _ in range(bench.config.runs):
        for name in BROKERS:
            noops[name].append(noop_run(bench, envs[name], n, urls[name]))
            drains[name].append(pipeline_run(bench, envs[name], n, True, urls[name]))
            if name == "single":
                full = pipeline_bytes()
                bench.reset_data()
                kept.append((full - pipeline_bytes()) / n)
    return drains, noops, kept


def pipeline_bytes() -> int:
    """Bytes on disk of the bench database (tables, indexes, TOAST); the pipeline's rows
    are what changes between a drain and the reset after it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        size = int(cursor.fetchone()[0])
    connection.close()
    return size


def report(
    bench: Bench,
    intakes: dict[str, list[LoadResult]],
    drains: dict[str, list[Drain]],
    noops: dict[str, list[Drain]],
    kept: list[float],
) -> None:
    """The cluster's figures beside the single node's, as ratios; start-ups apart."""
    intake = {name: median_of(intakes[name], lambda r: r.rps) for name in BROKERS}
    drain = {name: statistics.median(d.rate for d in drains[name]) for name in BROKERS}
    noop = {name: statistics.median(d.rate for d in noops[name]) for name in BROKERS}
    n = bench.config.events
    print(
        f"cluster intake: {ratio(intake['cluster'], intake['single']):.3g}x single node "
        f"({intake['cluster']:.0f} vs {intake['single']:.0f} events/s, POST "
        f"/v1/notifications at {bench.config.connections} connections; medians of "
        f"{bench.config.runs})"
    )
    print(
        f"cluster drain: {ratio(drain['cluster'], drain['single']):.3g}x single node "
        f"({drain['cluster']:.0f} vs {drain['single']:.0f} events/s, {n} events inapp + "
        f"email, worker + outbox_relay, first routed event -> last delivery final; quorum "
        f"queues on 3 nodes vs classic queues on one)"
    )
    print(
        f"cluster no-op: {ratio(noop['cluster'], noop['single']):.3g}x single node "
        f"({noop['cluster']:.0f} vs {noop['single']:.0f} tasks/s consumed and acked by one "
        f"worker, first task -> last)"
    )
    print(
        "cluster worker start-up (not in the ratios): start -> first routed event "
        + ", ".join(
            f"{name} {statistics.median(d.startup for d in drains[name]):.1f} s" for name in BROKERS
        )
    )
    print(
        f"PostgreSQL keeps per notification: {statistics.median(kept):.0f} bytes (tables, "
        f"indexes and TOAST after a drain of {n} inapp + email events, less the same "
        f"tables empty; median of {len(kept)})"
    )
    for name in BROKERS:
        report_unexpected(f"cluster intake ({name})", intakes[name], 202)
