"""The no-op drain: S2's baseline (and S2o's, and the cluster's), Celery's own cost per
message. n no-op tasks are queued with the worker stopped, then the worker
(scripts/worker.sh, the shipped command) is started and timed from the first task it
started to the last it finished (bench.apps notes both in the worker itself)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bench.config import BenchError
from bench.costs import counting_env, read_tally
from bench.pipeline_drains import Drain, ready_at
from bench.processes import Proc

if TYPE_CHECKING:  # Django is set up only after the bench has prepared its places
    from bench.runner import Bench


def noops_queue(bench: Bench, n: int, broker_url: str | None = None) -> None:
    """Empty the queues, then put n no-op tasks on `medium`."""
    from kombu import Producer

    from bench.tasks import NOOP_TASK
    from config.celery import app

    bench.purge_queues(broker_url)
    with app.connection_for_write(url=broker_url) as conn:
        producer = Producer(conn)
        for _ in range(n):
            # declare=[]: the queue exists, and of the worker's kind, not this process's.
            app.send_task(
                NOOP_TASK,
                queue="medium",
                routing_key="medium",
                exchange="notify",
                priority=5,
                producer=producer,
                declare=[],
            )


def noops_drained(
    bench: Bench, worker: Proc, n: int, broker_url: str | None = None, poll: float = 0.01
) -> tuple[float, float]:
    """Wait until `worker` has taken every one of the n no-op tasks queued on `medium`;
    (when the first was taken, when the queue was empty), as time.time(), read from the
    broker's counts every `poll` seconds."""
    from config.celery import app

    first = None
    with app.connection_for_read(url=broker_url) as conn:
        channel = conn.default_channel
        deadline = time.monotonic() + bench.config.pipeline_timeout
        while True:
            _, ready, _ = channel.queue_declare(queue="medium", passive=True)
            now = time.time()
            if first is None and ready < n:
                first = now
            if ready == 0:
                return first or now, now
            if time.monotonic() > deadline:
                raise BenchError(f"no-op: {ready} of {n} tasks left after the timeout")
            worker.check()
            time.sleep(poll)


def noop_run(
    bench: Bench, worker_env: dict[str, str], n: int, broker_url: str | None = None
) -> Drain:
    """n no-op tasks queued first, then the worker started and timed until the queue
    is empty (the last few in flight finish within a millisecond). `broker_url`: where
    the worker's env points, when not the bench's own broker (the queues exist there)."""

    noops_queue(bench, n, broker_url)
    stamp = time.time_ns()
    ready_key, count_key = f"bench:ready:{stamp}", f"bench:count:{stamp}"
    env = {
        **worker_env,
        **counting_env(count_key, bench.config.count_flush),
        "BENCH_READY_KEY": ready_key,
    }
    started = time.time()
    worker = bench.stack.start("worker-noop", ["bash", "scripts/worker.sh", "medium"], env)
    try:
        noops_drained(bench, worker, n, broker_url)
    finally:
        bench.stack.stop(worker)  # a warm shutdown: the worker writes its times at exit
    tally = read_tally(count_key)
    if tally.first_task is None or tally.last_task is None:
        raise BenchError("no-op: the worker wrote no task times (bench.apps)")
    return Drain(n, started, tally.first_task, tally.last_task, ready_at(ready_key))
