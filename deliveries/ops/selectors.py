"""The numbers behind /metrics, read at scrape time from PostgreSQL, RabbitMQ and Redis.

Every query here is an aggregate that returns a handful of rows; none loads models, and
none reads all of history: counts come from rollups (deliveries.counts, notify.counts),
the latency histogram from a window of recent deliveries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    Q,
    QuerySet,
    Sum,
)
from django.utils import timezone
from django_redis import get_redis_connection

from deliveries.counts import delivery_counts
from deliveries.models import (
    FINAL_STATUSES,
    DeadLetter,
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
)
from notify.counts import accepted_counts
from notify.models import Outbox
from notify.ops.health import broker_connection

PUSH_DROPS_PATTERN = "notify:metrics:push_drops:*"
BREAKER_STATE_PATTERN = "notify:breaker:*:state"
# What the breaker keys may hold, as the number the gauge shows.
BREAKER_STATES = {"closed": 0.0, "half_open": 1.0, "half-open": 1.0, "open": 2.0}
# Statuses where the provider was tried and the story is over: the ratio's denominator.
TRIED_FINAL_STATUSES = tuple(
    sorted(
        FINAL_STATUSES
        - {
            DeliveryStatus.SUPPRESSED,
            DeliveryStatus.SKIPPED_LIVE,
            DeliveryStatus.CANCELLED,
            DeliveryStatus.SUPERSEDED,
            # Carried by another delivery (its digest's), or never sent: not a try.
            DeliveryStatus.DIGESTED,
            DeliveryStatus.SKIPPED_READ,
        }
    )
)
# A first try that succeeded: accepted by the provider, or since reported delivered by it.
SUCCESS_STATUSES = frozenset({DeliveryStatus.DELIVERED, DeliveryStatus.REACHED})


def accepted_by_category() -> list[tuple[str, str, int]]:
    """(category key, queue, notifications accepted) over all history, from intake's
    rollup (notify.counts): it keeps counting what erasure and retention deleted."""
    return accepted_counts()


@dataclass(frozen=True)
class FirstAttempt:
    channel: str
    first_try: int
    finished: int

    @property
    def ratio(self) -> float:
        return self.first_try / self.finished


@dataclass(frozen=True)
class DeliveryTotals:
    """Deliveries per (channel, status, tries), read once per scrape; the delivery metrics
    are all views of it, so they agree with each other."""

    counts: dict[tuple[str, str, int], int]

    def by_status(self) -> dict[tuple[str, str], int]:
        """{(channel, status): deliveries}, only the pairs that have some."""
        totals: dict[tuple[str, str], int] = {}
        for (channel, status, _), n in self.counts.items():
            totals[channel, status] = totals.get((channel, status), 0) + n
        return totals

    def first_attempt_success(self) -> list[FirstAttempt]:
        """Per channel: delivered on the first try, out of deliveries that were tried and
        ended.

        Suppressed and skipped deliveries never reached a provider, so they are left out
        of both sides: a user who opted out is not a provider failure.
        """
        first: dict[str, int] = {}
        finished: dict[str, int] = {}
        for (channel, status, tries), n in self.counts.items():
            if status in TRIED_FINAL_STATUSES and tries >= 1:
                finished[channel] = finished.get(channel, 0) + n
                if status in SUCCESS_STATUSES and tries == 1:
                    first[channel] = first.get(channel, 0) + n
        return [
            FirstAttempt(channel, first.get(channel, 0), total)
            for channel, total in sorted(finished.items())
            if total > 0
        ]

    def dead(self) -> int:
        """Deliveries whose retries ran out (status `dead`)."""
        return sum(n for (_, status, _), n in self.counts.items() if status == DeliveryStatus.DEAD)


def delivery_totals() -> DeliveryTotals:
    """Every delivery ever made, by where it is now (or ended), from the deliveries'
    rollup (deliveries.counts): one statement over the rollup and what changed since."""
    return DeliveryTotals(delivery_counts())


@dataclass(frozen=True)
class LatencyHistogram:
    channel: str
    # (upper bound in seconds, deliveries at or under it), ascending; cumulative.
    buckets: list[tuple[float, int]]
    count: int
    sum_seconds: float


def delivery_latency(*, now: datetime | None = None) -> list[LatencyHistogram]:
    """Event→delivery latency (finished_at minus notification.created_at) per channel.

    Only deliveries that succeeded (`SUCCESS_STATUSES`) within
    NOTIFY_METRICS_LATENCY_WINDOW, so each scrape reads a bounded slice; one grouped query
    with one FILTERed count per bucket (`latency_rows`).
    """
    now = now or timezone.now()
    since = now - timedelta(seconds=settings.NOTIFY_METRICS_LATENCY_WINDOW)
    bounds = sorted(settings.NOTIFY_METRICS_LATENCY_BUCKETS)
    return [
        LatencyHistogram(
            channel=row["channel"],
            buckets=[(bound, row[f"le_{i}"]) for i, bound in enumerate(bounds)],
            count=row["count"],
            sum_seconds=row["total"].total_seconds() if row["total"] else 0.0,
        )
        for row in latency_rows(since=since, bounds=bounds)
    ]


def latency_rows(*, since: datetime, bounds: list[float]) -> QuerySet:
    """Per channel: deliveries that succeeded since `since`, their summed latency, and how
    many took at most each of `bounds` seconds (`le_<i>`), read through the partial index
    `delivery_success_recent`.

    A delivery the provider since reported `reached` counts: it was delivered first, and
    its finished_at stays the time the provider accepted it, so the latency is the same.
    """
    # accepted_at is the notification's created_at, on the row: no join to notifications.
    latency = ExpressionWrapper(F("finished_at") - F("accepted_at"), output_field=DurationField())
    per_bucket = {
        f"le_{i}": Count("id", filter=Q(latency__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(bounds)
    }
    return (
        # The same IN list as the index's predicate, so the planner can prove it.
        Delivery.objects.filter(status__in=sorted(SUCCESS_STATUSES), finished_at__gte=since)
        .annotate(latency=latency)
        .values("channel")
        .annotate(count=Count("id"), total=Sum("latency"), **per_bucket)
        .order_by()
    )


# The same IN list as the partial index `delivery_success_recent`, so the planner uses it.
_SUCCESS_IN = ", ".join(f"'{status}'" for status in sorted(SUCCESS_STATUSES))


def delivered_by_provider(*, now: datetime | None = None) -> list[tuple[str, str, int]]:
    """(channel, provider, count) of the deliveries that succeeded within
    NOTIFY_METRICS_LATENCY_WINDOW, by the provider of the try that sent them (its
    attempt row, the claim's last number): the same bounded slice as the latency, each
    attempt found through the attempts' unique index."""
    now = now or timezone.now()
    since = now - timedelta(seconds=settings.NOTIFY_METRICS_LATENCY_WINDOW)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT d.channel, a.provider, count(*) FROM {Delivery._meta.db_table} d
              JOIN {DeliveryAttempt._meta.db_table} a
                ON a.delivery_id = d.id AND a.number = d.attempts
               AND a.accepted_at = d.accepted_at
             WHERE d.status IN ({_SUCCESS_IN}) AND d.finished_at >= %(since)s
               AND a.provider <> ''
             GROUP BY d.channel, a.provider ORDER BY 1, 2
            """,
            {"since": since},
        )
        return cursor.fetchall()


def open_dead_letters() -> int:
    """Dead-lettered messages moved into the table and not re-driven yet (one count over
    the partial index `dead_letter_open`)."""
    return DeadLetter.objects.filter(redriven_at__isnull=True).count()


def oldest_unpublished_outbox_age(*, now: datetime | None = None) -> float:
    """Seconds since the oldest due outbox row fell due and still waits to be published;
    0 when none (a scheduled notification is not late before its send_at).

    Served by the partial index `outbox_unpublished_class_due`.
    """
    now = now or timezone.now()
    oldest = Outbox.objects.filter(published_at__isnull=True, due_at__lte=now).aggregate(
        at=Min("due_at")
    )["at"]
    if oldest is None:
        return 0.0
    return max(0.0, (now - oldest).total_seconds())


def queue_depths() -> dict[str, int]:
    """Messages ready in each of our queues (work queues and dead_letter), live.

    A passive declare per queue on one connection to the first node that answers (each
    tried with a short timeout); raises when no node can be reached.
    """
    names = [queue.name for queue in settings.CELERY_TASK_QUEUES]
    depths: dict[str, int] = {}
    with broker_connection() as conn:  # any node of a cluster knows every queue
        channel = conn.default_channel
        for name in names:
            _, count, _ = channel.queue_declare(queue=name, passive=True)
            depths[name] = count
    return depths


def push_drops() -> dict[str, float]:
    """{channel: pushes dropped} from the counters push providers keep in Redis."""
    client = get_redis_connection("default")
    drops: dict[str, float] = {}
    for key in client.scan_iter(match=PUSH_DROPS_PATTERN, count=100):
        value = client.get(key)
        channel = _text(key).rsplit(":", 1)[-1]
        if value is not None:
            drops[channel] = float(value)
    return drops


def breaker_states() -> dict[str, float]:
    """{provider: 0 closed, 1 half-open, 2 open} from the circuit breakers' Redis keys.

    A key may hold the state's name or its number; anything else is left out.
    """
    client = get_redis_connection("default")
    states: dict[str, float] = {}
    for key in client.scan_iter(match=BREAKER_STATE_PATTERN, count=100):
        raw = client.get(key)
        if raw is None:
            continue
        provider = _text(key)[len("notify:breaker:") : -len(":state")]
        text = _text(raw).strip().lower()
        if text in BREAKER_STATES:
            states[provider] = BREAKER_STATES[text]
        else:
            try:
                states[provider] = float(text)
            except ValueError:
                continue
    return states


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
