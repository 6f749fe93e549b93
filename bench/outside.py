"""S2o: S2 measured from outside, as a new user would run it.

1,000 `order.shipped` events (BENCH_S2O_EVENTS) over 100 people (BENCH_S2O_PEOPLE), 10
each, posted through the API in-process with nothing running; then every Procfile
process but web is started (the workers of each queue, beat, the relays, the
dead-letter consumer, the bounce receiver, the stream, the analytics shipper), and the
drain is timed from the first routed event until every delivery is final. The baseline
is a plain Celery drain of twice as many no-op tasks by a prefork worker of 2
processes, acks late, prefetch 1, timed from its first task to its last; the ratio is
events/s to tasks/s.
Start-ups are printed on their own line, never inside the ratio; provider rate limits
are lifted (capacity, not policy), as in S2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.config import S2_TARGET, env_int
from bench.costs import counting_env
from bench.noop_drain import noops_drained, noops_queue
from bench.pipeline_drains import (
    event_recipients,
    post_event,
    routed_span,
    wait_final,
)
from bench.processes import procfile_entries, python, start_smtp_sink
from bench.report import ratio, verdict
from scripts.ports import unused_port

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench

# The baseline worker: Celery's defaults a team would start from, on two processes.
NOOP_WORKER = ["-m", "celery", "-A", "config", "worker", "-Q", "medium", "-P", "prefork",
               "-c", "2", "--prefetch-multiplier", "1"]  # fmt: skip


def noop_drain(bench: Bench, worker_env: dict[str, str], n: int) -> tuple[float, float]:
    """n no-op tasks queued, then the prefork worker started; (tasks/s from the first
    task taken to the queue empty, seconds from start to the first task). Read from the
    broker's counts every 5 ms: a prefork worker's children keep no tally of their own."""
    import time

    noops_queue(bench, n)
    started = time.time()
    worker = bench.stack.start("s2o-noop", [python(), *NOOP_WORKER], worker_env)
    try:
        first, drained = noops_drained(bench, worker, n, poll=0.005)
    finally:
        bench.stack.stop(worker)
    return n / max(drained - first, 1e-6), first - started


def scenario_s2o(bench: Bench) -> None:
    """Time the outside-in drain against the no-op drain once each; print the ratio."""
    import os
    import time

    from django.test import Client

    n = env_int("BENCH_S2O_EVENTS", 1000)
    people = env_int("BENCH_S2O_PEOPLE", 100)
    sink, worker_env = start_smtp_sink(bench.stack, bench.env)
    noop_rate, noop_startup = noop_drain(bench, worker_env, 2 * n)

    bench.reset_data()
    users = event_recipients(people)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {bench.api_key}")
    stamp = f"s2o-{os.getpid()}-{time.time_ns()}"
    for number in range(n):
        post_event(client, stamp, number, users[number % len(users)])
    bench.close_db()
    env = {
        **worker_env,
        **counting_env(f"bench:count:{stamp}", bench.config.count_flush),
        "PORT": str(unused_port()),  # the stream's
        "NOTIFY_BOUNCE_LISTEN": f"127.0.0.1:{unused_port()}",
        "NOTIFY_ANALYTICS_READER_ADDRESS": f"127.0.0.1:{unused_port()}",
    }
    started = time.time()
    procs = [
        bench.stack.start(f"s2o-{name}", argv, env)
        for name, argv in procfile_entries(("*",))
        if name != "web"
    ]
    try:
        wait_final(bench, n, procs, label="S2o")
    finally:
        for proc in procs:
            bench.stack.stop(proc)
        bench.stack.stop(sink)
    first, finished = routed_span("")  # every event: S2o posts no warm-up
    bench.close_db()
    events_rate = n / (finished - first)
    # Events/s against tasks/s, as the measurement from outside put them.
    value = ratio(events_rate, noop_rate)
    print(
        f"S2o outside-in drain: {value:.3g}x ({events_rate:.0f} events/s over {people} "
        f"people, every Procfile process but web, vs {noop_rate:.0f} no-op tasks/s on a "
        f"prefork worker of 2; {verdict(value, S2_TARGET, at_least=True)})"
    )
    print(
        f"S2o start-up (not in the ratio): processes start -> first routed event "
        f"{first - started:.1f} s; no-op worker start -> first task {noop_startup:.1f} s"
    )
