"""Timed drains for S2: work preloaded with the worker stopped, then timed from the
worker's start (scripts/worker.sh, the shipped command) until all of it is done.

`noop_run` drains no-op tasks (Celery's own cost per message); `pipeline_run` drains
events posted through the API (inapp + email), with the outbox relay when there is one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.config import DEMO_USER, BenchError, env_float
from bench.places import BackendSampler
from bench.processes import Proc

if TYPE_CHECKING:  # Django is set up only after the bench has prepared its places
    from django.test import Client

    from bench.runner import Bench


@dataclass(frozen=True)
class Drain:
    """One timed drain: n messages or events, wall-clock times (time.time())."""

    n: int
    started: float  # the worker process was started
    finished: float  # the last one was done
    ready: float | None = None  # the worker said it was ready to consume
    statements: int = 0  # SQL statements the worker (and relay) reported at exit
    peak_backends: int = 0  # PostgreSQL backends on the bench database, at most

    @property
    def rate(self) -> float:
        return self.n / (self.finished - self.started)

    @property
    def startup(self) -> float | None:
        return self.ready - self.started if self.ready else None

    @property
    def drain_rate(self) -> float | None:
        if self.ready is None or self.finished <= self.ready:
            return None
        return self.n / (self.finished - self.ready)


def ready_at(key: str) -> float | None:
    """When the worker said it was ready (bench.apps writes it), as time.time()."""
    from django_redis import get_redis_connection

    raw = get_redis_connection("default").get(key)
    return float(raw) if raw else None


def noop_run(bench: Bench, worker_env: dict[str, str], n: int) -> Drain:
    """n no-op tasks queued first, then the worker started and timed until the queue
    is empty (the last few in flight finish within a millisecond)."""
    from bench.tasks import NOOP_TASK
    from notify.celery import app

    bench.purge_queues()
    with app.producer_or_acquire() as producer:
        for _ in range(n):
            app.send_task(
                NOOP_TASK, queue="medium", routing_key="medium", exchange="notify",
                priority=5, producer=producer,
            )  # fmt: skip
    ready_key = f"bench:ready:{time.time_ns()}"
    env = {**worker_env, "BENCH_READY_KEY": ready_key}
    started = time.time()
    worker = bench.stack.start("worker-noop", ["bash", "scripts/worker.sh", "medium"], env)
    try:
        with app.connection_for_read() as conn:
            channel = conn.default_channel
            deadline = time.monotonic() + bench.config.pipeline_timeout
            while True:
                _, ready, _ = channel.queue_declare(queue="medium", passive=True)
                if ready == 0:
                    break
                if time.monotonic() > deadline:
                    raise BenchError(f"no-op: {ready} of {n} tasks left after the timeout")
                worker.check()
                time.sleep(0.01)
        finished = time.time()
    finally:
        bench.stack.stop(worker)
    return Drain(n, started, finished, ready_at(ready_key))


def pipeline_run(
    bench: Bench, worker_env: dict[str, str], n: int, has_relay: bool, *, count_intake: bool
) -> tuple[Drain, float | None]:
    """Preload n events through the API in-process (worker stopped), then time the
    worker (and relay) from start until every delivery is final. Also returns the
    intake's SQL statements per event when asked to count them."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django_redis import get_redis_connection

    bench.reset_data()
    users = event_recipients(bench.config.event_recipients)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {bench.api_key}")
    stamp = f"s2-{os.getpid()}-{time.time_ns()}"
    counted = min(n, 100) if count_intake else 0
    intake_sql: float | None = None
    with CaptureQueriesContext(connection) as captured:
        for number in range(counted):
            post_event(client, stamp, number, users[number % len(users)])
    if counted:
        intake_sql = len(captured.captured_queries) / counted
    for number in range(counted, n):
        post_event(client, stamp, number, users[number % len(users)])
    bench.close_db()

    sql_key, ready_key = f"bench:sql:{stamp}", f"bench:ready:{stamp}"
    env = {
        **worker_env,
        "BENCH_COUNT_SQL": "1",
        "BENCH_SQL_KEY": sql_key,
        "BENCH_READY_KEY": ready_key,
    }
    started = time.time()
    procs = [bench.stack.start("worker-pipeline", ["bash", "scripts/worker.sh", "medium"], env)]
    if has_relay:
        procs.append(bench.stack.start("relay", ["bash", "scripts/manage.sh", "outbox_relay"], env))
    try:
        with BackendSampler(bench.places) as sampler:
            wait_final(bench, n, procs)
            finished = time.time()
    finally:
        for proc in procs:
            bench.stack.stop(proc)  # a warm shutdown: the SQL count is written at exit
        bench.close_db()
    statements = int(get_redis_connection("default").get(sql_key) or 0)
    drain = Drain(n, started, finished, ready_at(ready_key), statements, sampler.peak)
    return drain, intake_sql


def event_recipients(count: int) -> list[str]:
    """The user ids S2's events go to, round robin: the demo user, and more with email
    when `count` > 1. Per-recipient order makes one person's emails go one at a time, so
    one recipient is the worst case; a real day's traffic is spread over many people."""
    from notify.models import Recipient

    others = [f"bench-s2-{i}" for i in range(1, count)]
    Recipient.objects.bulk_create(
        [Recipient(user_id=u, email=f"{u}@example.com", locale="en") for u in others],
        ignore_conflicts=True,
    )
    return [DEMO_USER, *others]


def post_event(client: Client, stamp: str, number: int, user_id: str) -> None:
    """POST one inapp + email notification through the API, in-process; it must be 202."""
    response = client.post(
        "/v1/notifications",
        {
            "event_id": f"{stamp}-{number}",
            "user_id": user_id,
            "category": "order.shipped",
            "channels": ["inapp", "email"],
            "payload": {"order_number": f"S-{number}", "delivery_date": "2026-12-03",
                        "items_count": 1},
        },
        content_type="application/json",
    )  # fmt: skip
    if response.status_code != 202:
        raise BenchError(f"preload POST answered {response.status_code}: {response.content!r}")


def wait_final(bench: Bench, n: int, procs: list[Proc]) -> None:
    """Return once every notification has deliveries and all of them are final.

    Fails early when a task was dead-lettered (it raised: see the worker's log) or
    nothing moved for BENCH_STALL_SECONDS, instead of waiting out the timeout.
    """
    from django.db.models import Exists, OuterRef

    from deliveries.models import FINAL_STATUSES, Delivery
    from notify.celery import app
    from notify.models import Notification

    of_it = Delivery.objects.filter(notification=OuterRef("pk"))
    pending = Notification.objects.filter(
        ~Exists(of_it) | Exists(of_it.exclude(status__in=FINAL_STATUSES))
    )
    deadline = time.monotonic() + bench.config.pipeline_timeout
    stall = env_float("BENCH_STALL_SECONDS", 60.0)
    last_left, last_change = n, time.monotonic()
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        while True:
            left = pending.count()
            now = time.monotonic()
            if left == 0:
                break
            if left != last_left:
                last_left, last_change = left, now
            _, dead, _ = channel.queue_declare(queue="dead_letter", passive=True)
            problem = ""
            if dead:
                problem = f"{dead} task(s) dead-lettered (they raised)"
            elif now - last_change > stall:
                problem = f"no progress for {stall:.0f} s"
            elif now > deadline:
                problem = f"not done after {bench.config.pipeline_timeout:.0f} s"
            if problem:
                raise BenchError(
                    f"{problem}; {left} of {n} notifications not final; deliveries "
                    f"{status_summary()}; end of {procs[0].log_path}:\n"
                    f"{procs[0].tail(8)}"
                )
            for proc in procs:
                proc.check()
            time.sleep(0.1)
    summary = status_summary()
    if set(summary) - {"delivered"}:
        print(f"S2: WARNING not every delivery was delivered: {summary}")


def status_summary() -> dict[str, int]:
    """How many deliveries are in each status, e.g. {'delivered': 2000}."""
    from django.db.models import Count

    from deliveries.models import Delivery

    rows = Delivery.objects.values("status").annotate(n=Count("id")).order_by("status")
    return {row["status"]: row["n"] for row in rows}
