"""Timed drains for S2: work preloaded with the worker stopped, then the worker
(scripts/worker.sh, the shipped command) started and timed from its first message.

`pipeline_run` drains events posted through the API (inapp + email), with the outbox
relay when there is one, from the first routed event (the earliest delivery row: routing
creates them) to the last delivery final (the latest finished_at), read in the database,
so neither the start-up nor the bench's polling is inside the figure (the no-op baseline
is bench/noop_drain.py). With a relay,
one warm-up event goes through first and the preloaded events are held back until it is
final: a channel's first use in the process (an SDK's import, a token) is start-up too.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.config import DEMO_USER, BenchError
from bench.costs import Costs, PgCpu, counted_here, counting_env, read_tally
from bench.places import BackendSampler
from bench.processes import Proc

if TYPE_CHECKING:  # Django is set up only after the bench has prepared its places
    from django.test import Client

    from bench.runner import Bench


# How often the bench looks whether a drain is done. Its figures are read from the
# database afterwards (the first routed event, the last delivery final), so this only
# bounds the harness's own load on the machine it measures.
PROGRESS_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class Drain:
    """One timed drain: n messages or events, wall-clock times (time.time())."""

    n: int
    started: float  # the worker process was started
    first: float  # the first no-op task started / the first event was routed
    finished: float  # the last no-op task finished / the last delivery was final
    ready: float | None = None  # the worker said it was ready to consume
    costs: Costs | None = None  # intake + drain, every process (pipeline only)
    intake: Costs | None = None  # of which the API's part, in-process (pipeline only)
    peak_backends: int = 0  # PostgreSQL backends on the bench database, at most
    # The worker process's own CPU seconds from its worker_ready to the last delivery
    # final: its start-up (imports, pools) is not in it (pipeline only).
    worker_cpu: float | None = None
    # The first routed event of all, the warm-up's when there is one (else `first`).
    startup_first: float | None = None
    # The other processes' CPU seconds over the same span (the relay, and what runs
    # beside the worker), their start-up left out likewise (pipeline only).
    others_cpu: float | None = None

    @property
    def rate(self) -> float:
        """Per second from the first message to the last: start-up is not in it."""
        return self.n / (self.finished - self.first)

    @property
    def worker_cpu_ms(self) -> float | None:
        """The worker's CPU per message or event (ms), start-up excluded."""
        return None if self.worker_cpu is None else self.worker_cpu * 1000 / self.n

    @property
    def startup(self) -> float:
        """Worker start -> its first message (for the pipeline: the first routed event,
        the warm-up's)."""
        return (self.startup_first or self.first) - self.started

    @property
    def ready_after(self) -> float | None:
        """Worker start -> Celery's worker_ready."""
        return self.ready - self.started if self.ready else None


def ready_at(key: str) -> float | None:
    """When the worker said it was ready (bench.apps writes it), as time.time()."""
    from django_redis import get_redis_connection

    raw = get_redis_connection("default").get(key)
    return float(raw) if raw else None


def pipeline_run(
    bench: Bench,
    worker_env: dict[str, str],
    n: int,
    has_relay: bool,
    broker_url: str | None = None,
    category: str = "order.shipped",
    *,
    channels: tuple[str, ...] = ("inapp", "email"),
    users: list[str] | None = None,
    queue: str = "medium",
    label: str = "S2",
    beside: tuple[tuple[str, list[str], dict[str, str]], ...] = (),
    beside_ready: Callable[[], bool] | None = None,
) -> Drain:
    """Preload n events through the API in-process (worker stopped), then start the
    worker (and relay) and time them from the first routed event until every delivery is
    final. With a relay, the preloaded rows are held back (due far ahead) until one
    warm-up event of the same kind went through: what a process pays on a channel's
    first use (a provider SDK's import, its client, a token, a connection) is start-up,
    not part of the drain, as the bare clients fetch theirs before their first post.
    Counts the intake's and the processes' statements, publishes and PostgreSQL CPU.
    `broker_url`: where the worker's env points, when not the bench's own broker (the
    intake does not publish: the relay does, in `worker_env`). `channels`, `users`
    (round robin; S2's recipients when None) and `queue` (the category's class, whose
    worker is started): what S10 and S11 drain instead. `beside`: (name, argv, env) of
    more processes to run with the worker (S2's analytics shipper); `beside_ready`, when
    given, must hold after the warm-up before the preloaded events go (the shipper has
    shipped the warm-up's events: its start-up, an embedded engine's load, is not in the
    drain)."""
    from django.test import Client

    bench.reset_data()
    users = users or event_recipients(bench.config.event_recipients)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {bench.api_key}")
    stamp = f"{label.lower()}-{os.getpid()}-{time.time_ns()}"
    if has_relay:
        # Posted first: a person's later events wait for their earlier ones (routed or
        # not) to go, so the warm-up must be nobody's later event.
        post_event(client, f"{stamp}:warm", 0, users[0], category, channels)
    with PgCpu(bench.places, bench.config.pg_cpu_interval) as intake_cpu, counted_here() as here:
        for number in range(n):
            user = users[number % len(users)]
            post_event(client, stamp, number, user, category, channels)
    intake = Costs(n, here.sql, here.published, intake_cpu.seconds(bench=True))
    if has_relay:
        preloaded_hold(stamp)
    bench.close_db()

    count_key, ready_key = f"bench:count:{stamp}", f"bench:ready:{stamp}"
    env = {
        **worker_env,
        **counting_env(count_key, bench.config.count_flush),
        "BENCH_READY_KEY": ready_key,
    }
    started = time.time()
    worker = ["bash", "scripts/worker.sh", queue]
    procs = [bench.stack.start(f"worker-{label.lower()}", worker, env)]
    if has_relay:
        procs.append(bench.stack.start("relay", ["bash", "scripts/manage.sh", "outbox_relay"], env))
    procs += [bench.stack.start(name, argv, {**env, **more}) for name, argv, more in beside]
    try:
        with (
            BackendSampler(bench.places) as sampler,
            PgCpu(bench.places, bench.config.pg_cpu_interval) as cpu,
        ):
            worker_at_ready = worker_cpu_when_ready(procs[0], ready_key)
            others_at = _cpu_seconds(procs[1:])
            if has_relay:
                warm_up_wait(f"{stamp}:warm-0", procs)  # post_event's id: the stamp, -number
                if beside_ready is not None:
                    wait_until(beside_ready, procs, what="the processes beside the worker "
                                "not ready", poll=READY_POLL_SECONDS)  # fmt: skip
                worker_at_ready = procs[0].cpu_seconds()
                others_at = _cpu_seconds(procs[1:])
                cpu.restart()  # PostgreSQL's share of the start-up is left out too
                preloaded_release(stamp)
            wait_final(bench, n, procs, label=label, broker_url=broker_url)
            worker_cpu = procs[0].cpu_seconds() - worker_at_ready
            others_cpu = _cpu_seconds(procs[1:]) - others_at
    finally:
        for proc in procs:
            bench.stack.stop(proc)  # a warm shutdown: the counts are written at exit
    first, finished = routed_span(f"{stamp}-")
    startup_first, _ = routed_span(stamp)  # the warm-up's route, when there is one
    bench.close_db()
    tally = read_tally(count_key)
    costs = Costs(
        n,
        intake.sql + tally.sql,
        intake.published + tally.published,
        intake.pg_cpu + cpu.seconds(),
    )
    return Drain(
        n,
        started,
        first,
        finished,
        ready_at(ready_key),
        costs,
        intake,
        sampler.peak,
        worker_cpu,
        startup_first,
        others_cpu,
    )


def _cpu_seconds(procs: list[Proc]) -> float:
    return sum(proc.cpu_seconds() for proc in procs)


def warm_up_wait(event_id: str, procs: list[Proc]) -> None:
    """Return once the warm-up event is routed and every delivery of it is final."""
    from deliveries.models import FINAL_STATUSES, Delivery

    of_it = Delivery.objects.filter(notification__event_id=event_id)
    wait_until(
        lambda: of_it.exists() and not of_it.exclude(status__in=FINAL_STATUSES).exists(),
        procs,
        what=f"the warm-up event {event_id} not final",
        poll=READY_POLL_SECONDS,
    )


# Far enough that the relay never finds a held row due (a scheduled notification's row
# waits the same way, for its send_at).
HOLD_FOR = 365 * 24 * 3600


def preloaded_hold(stamp: str) -> None:
    """Keep the relay off the preloaded rows: due a year from now."""
    _preloaded_due(stamp, time.time() + HOLD_FOR)


def preloaded_release(stamp: str) -> None:
    """Make the preloaded rows due now; the relay finds them at its next round (it polls
    every NOTIFY_OUTBOX_POLL_INTERVAL) and publishes them all, as it would have at start."""
    _preloaded_due(stamp, time.time())


def _preloaded_due(stamp: str, due: float) -> None:
    from datetime import UTC, datetime

    from notify.outbox_models import Outbox

    Outbox.objects.filter(notification__event_id__startswith=f"{stamp}-").update(
        due_at=datetime.fromtimestamp(due, UTC)
    )


def worker_cpu_line(label: str, unit: str, drains: list[Drain]) -> str:
    """The line that reports the worker process's own CPU per `unit` (median of the
    drains'), start-up excluded; empty when no drain measured it."""
    measured = [d.worker_cpu_ms for d in drains if d.worker_cpu_ms is not None]
    if not measured:
        return ""
    return (
        f"{label} worker process CPU per {unit} (from its worker_ready to the last delivery "
        f"final, start-up excluded; its PostgreSQL backends not included): "
        f"{statistics.median(measured):.2f} ms"
    )


# How often the worker is looked at for its ready mark: its CPU is read within this of it.
READY_POLL_SECONDS = 0.02
READY_TIMEOUT = 90.0  # for a worker to start


def wait_ready(keys: list[str], procs: list[Proc], *, poll: float = 0.2) -> None:
    """Return once every worker wrote its ready time (bench.apps), looking every `poll`
    seconds, or fail."""
    wait_until(
        lambda: all(ready_at(key) for key in keys), procs, what="workers not ready", poll=poll
    )


def wait_until(done: Callable[[], bool], procs: list[Proc], *, what: str, poll: float) -> None:
    """Look at `done` every `poll` seconds until it holds; fail when one of `procs` exited
    or after READY_TIMEOUT (`what` says what was still not so)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"{what} after {READY_TIMEOUT:.0f} s")
        for proc in procs:
            proc.check()
        time.sleep(poll)


def worker_cpu_when_ready(worker: Proc, ready_key: str) -> float:
    """The worker's CPU seconds as soon as it marked itself ready (bench.apps), read
    within READY_POLL_SECONDS of it: what its start-up cost, to leave out of its share."""
    wait_ready([ready_key], [worker], poll=READY_POLL_SECONDS)
    return worker.cpu_seconds()


def routed_span(prefix: str) -> tuple[float, float]:
    """(first routed event, last delivery final) as time.time() of the events whose id
    starts with `prefix`, from their deliveries: routing creates them, and each final one
    has its finished_at."""
    from django.apps import apps
    from django.db.models import Max, Min

    delivery = apps.get_model("deliveries", "Delivery")
    span = delivery.objects.filter(notification__event_id__startswith=prefix).aggregate(
        first=Min("created_at"), last=Max("finished_at")
    )
    if span["first"] is None or span["last"] is None:
        raise BenchError(f"no routed event or no finished delivery: {span}")
    return span["first"].timestamp(), span["last"].timestamp()


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


def post_event(
    client: Client,
    stamp: str,
    number: int,
    user_id: str,
    category: str = "order.shipped",
    channels: tuple[str, ...] = ("inapp", "email"),
) -> None:
    """POST one notification (inapp + email unless `channels` says otherwise) through
    the API, in-process; it must be 202. `category`: order.shipped, a login code (S11)
    or the digest scenario's comments (bench/digests.py)."""
    if category == "order.shipped":
        payload = {"order_number": f"S-{number}", "delivery_date": "2026-12-03", "items_count": 1}
    elif category == "security.login_code":
        payload = {"code": f"{number % 1000000:06d}"}
    else:
        payload = {"thread_id": "t", "comment_id": f"c{number}", "text": f"comment {number}"}
    response = client.post(
        "/v1/notifications",
        {
            "event_id": f"{stamp}-{number}",
            "user_id": user_id,
            "category": category,
            "channels": list(channels),
            "payload": payload,
        },
        content_type="application/json",
    )
    if response.status_code != 202:
        raise BenchError(f"preload POST answered {response.status_code}: {response.content!r}")


def wait_final(
    bench: Bench, n: int, procs: list[Proc], *, label: str = "S2", broker_url: str | None = None
) -> None:
    """Return once every notification is routed and every delivery is final.

    Fails early when a task was dead-lettered (it raised: see the worker's log) or
    nothing moved for BENCH_STALL_SECONDS, instead of waiting out the timeout.
    """
    from config.celery import app

    deadline = time.monotonic() + bench.config.pipeline_timeout
    stall = bench.config.stall_seconds
    last_left, last_change = n, time.monotonic()
    with app.connection_for_read(url=broker_url) as conn:
        channel = conn.default_channel
        while True:
            left = pending_count()
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
                    f"{problem}; {left} notifications unrouted or deliveries not final "
                    f"(of {n} events); deliveries {status_summary()}; end of "
                    f"{procs[0].log_path}:\n"
                    f"{procs[0].tail(8)}"
                )
            for proc in procs:
                proc.check()
            time.sleep(PROGRESS_POLL_SECONDS)
    summary = status_summary()
    # digested: listed in a sent digest; reached: an SMS whose receipt said delivered.
    if set(summary) - {"delivered", "digested", "reached"}:
        print(f"{label}: WARNING not every delivery was delivered: {summary}")


def pending_count() -> int:
    """Notifications not routed yet plus deliveries not final yet: zero once the drain
    is done. The bench polls it while the subject runs, on the same CPUs, so it is two
    plain reads (the unrouted through their partial index, the deliveries in one pass)
    rather than a per-notification probe of its deliveries, whose cost grew with every
    row and took a fifth of a core from an 8,000-event drain."""
    from deliveries.models import FINAL_STATUSES, Delivery
    from notify.models import Notification

    unrouted = Notification.objects.filter(routed_at__isnull=True).count()
    return unrouted + Delivery.objects.exclude(status__in=FINAL_STATUSES).count()


def status_summary() -> dict[str, int]:
    """How many deliveries are in each status, e.g. {'delivered': 2000}."""
    from django.db.models import Count

    from deliveries.models import Delivery

    rows = Delivery.objects.values("status").annotate(n=Count("id")).order_by("status")
    return {row["status"]: row["n"] for row in rows}
