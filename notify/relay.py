"""The outbox relay: publishes route tasks for accepted notifications, in batches.

Intake writes a notification and its outbox row in one transaction and returns; it
never waits for the broker. This long-running process (`manage.py outbox_relay`, the
`relay` process type) is woken by PostgreSQL's NOTIFY when such a transaction commits,
takes the unpublished rows with `FOR UPDATE SKIP LOCKED` (several relays can run),
publishes each with publisher confirms, and marks the batch published in the same
transaction.

No loss: a row's mark commits only after the broker confirmed its message, in the same
transaction that locked it. A relay that dies between the confirm and the commit leaves
the row unpublished, so it is published again — a duplicate route message, which
routing ignores (it locks the notification and routes it once).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.module_loading import import_string

from notify.broker import batch_size_for, chunked, publish_task
from notify.fair_share import (
    PublishedUnrouted,
    RecentPublishes,
    fair_share_allocate,
    fair_share_budget,
)
from notify.models import Notification, Outbox
from notify.outbox_wake import wake_listener

logger = logging.getLogger(__name__)


QUEUE_CLASSES = ("high", "medium", "low")

# A published row not routed within this long (seconds) stops counting against its
# class's room: its route is late or lost, and the route sweeper republishes it.
UNROUTED_FORGET_SECONDS = 30.0


@dataclass(frozen=True)
class RoundResult:
    published: int
    held_back: bool  # a fair class left due rows waiting for room
    # Rows may be left that this round had no room for: a class published its whole
    # limit, or a fair class published any (its budget, not the rows, ended its round).
    # A class that published fewer than its limit took every due row it could see, and
    # a row that commits later wakes the relay by its own NOTIFY.
    more: bool = False


@dataclass
class _FairState:
    """What this relay remembers of one fair class between rounds."""

    recent: RecentPublishes = field(default_factory=RecentPublishes)
    unrouted: PublishedUnrouted = field(
        default_factory=lambda: PublishedUnrouted(forget_after=UNROUTED_FORGET_SECONDS)
    )


_fair_states: dict[str, _FairState] = {}


def outbox_publish_pending(
    *, older_than: float = 0.0, queues: Sequence[str] = QUEUE_CLASSES
) -> int:
    """One round: publish due outbox rows class by class — `high` first, then `medium`,
    then at most NOTIFY_OUTBOX_LOW_BATCH of `low` — and return how many went out.

    A campaign puts thousands of `low` rows in the outbox at once; taking them a small
    batch per round, with `high` looked at again before each, keeps a login code from
    waiting behind them. A scheduled notification's row falls due at its send_at.
    `older_than` (seconds) leaves rows due more recently to a running relay. `queues`:
    the classes this relay publishes (the shipped Procfile runs one relay for `high` and
    `medium` and a lower-priority one for `low`, so a campaign's publishing never holds
    up a login code's). The classes in NOTIFY_OUTBOX_FAIR_QUEUES are published fairly
    across producers (`outbox_publish_round`).
    """
    return outbox_publish_round(older_than=older_than, queues=queues).published


def outbox_publish_round(
    *, older_than: float = 0.0, queues: Sequence[str] = QUEUE_CLASSES
) -> RoundResult:
    """`outbox_publish_pending`'s round, also saying whether a fair class held rows back
    for want of room (the relay then looks again after NOTIFY_OUTBOX_FAIR_RECHECK)."""
    cutoff = timezone.now() - timedelta(seconds=older_than)
    limits = {
        "high": settings.NOTIFY_OUTBOX_BATCH,
        "medium": settings.NOTIFY_OUTBOX_BATCH,
        "low": settings.NOTIFY_OUTBOX_LOW_BATCH,
    }
    published, held_back, more = 0, False, False
    for queue in queues:
        if queue in settings.NOTIFY_OUTBOX_FAIR_QUEUES:
            count, held = _publish_class_fair(queue, limits[queue], cutoff)
            held_back = held_back or held
            more = more or count > 0
        else:
            count = _publish_class(queue, limits[queue], cutoff)
            more = more or count >= limits[queue]
        published += count
    return RoundResult(published, held_back, more)


# One class's oldest due rows, locked (rows another relay holds are skipped) and marked
# published, in one statement: the mark commits only after the broker confirmed their
# messages (the relay publishes between this statement and its commit), and a publish
# that fails takes its rows' mark back (_UNMARK_SQL) before the commit. The person is
# looked up per row, as in _FAIR_ROWS_SQL; the rows are marked by primary-key probes
# (the ids are taken first, so no estimate can turn the mark into a scan of the
# table). Written once: a login code's relay step is this statement, its publish and
# the commit.
_TAKE_SQL = """
UPDATE notify_outbox o
   SET published_at = %(now)s, publish_attempts = o.publish_attempts + 1
 WHERE o.id = ANY(ARRAY(
    SELECT w.id FROM notify_outbox w
     WHERE w.published_at IS NULL AND w.queue = %(queue)s AND w.due_at <= %(cutoff)s
     ORDER BY w.due_at LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
 ))
RETURNING o.id, o.notification_id,
          (SELECT n.recipient_id FROM notify_notification n WHERE n.id = o.notification_id),
          o.due_at
"""
_DUE_SQL = """
SELECT 1 FROM notify_outbox
 WHERE published_at IS NULL AND queue = %(queue)s AND due_at <= %(cutoff)s LIMIT 1
"""
_UNMARK_SQL = """
UPDATE notify_outbox
   SET published_at = NULL, publish_attempts = publish_attempts - 1
 WHERE id = ANY(%(ids)s)
"""


def _publish_class(queue: str, limit: int, cutoff: datetime) -> int:
    """Publish up to `limit` due rows of one queue class, oldest first, and mark them."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _TAKE_SQL, {"now": timezone.now(), "queue": queue, "cutoff": cutoff, "limit": limit}
        )
        rows = sorted(cursor.fetchall(), key=lambda row: (row[3], row[0]))  # due order
        published = set(_publish_batches(queue, [row[:3] for row in rows]))
        unpublished = [row[0] for row in rows if row[0] not in published]
        if unpublished:  # the broker went away mid-round: those wait for the next round
            cursor.execute(_UNMARK_SQL, {"ids": unpublished})
    return len(published)


# Each producer's oldest due rows of a class, at most %(each)s each, locked (rows another
# relay holds are skipped). Cost per producer, not per waiting row: the producers with
# waiting rows are found by a skip scan of the outbox's (queue, producer, due_at, id)
# index of unpublished rows (each step one probe for the next larger producer id), and
# each one's first rows by one probe of the same index. Rows without a producer (written
# before the column existed) are one more producer, so none is left behind. The person
# is looked up per chosen row (a primary-key probe: a join let the planner scan every
# notification), and a row whose notification is gone is published all the same (routing
# skips it) rather than block its producer's turn.
_FAIR_ROWS_SQL = """
WITH RECURSIVE producers(producer_id) AS (
    (SELECT producer_id FROM notify_outbox
      WHERE published_at IS NULL AND queue = %(queue)s AND producer_id IS NOT NULL
      ORDER BY producer_id LIMIT 1)
    UNION ALL
    SELECT (SELECT o.producer_id FROM notify_outbox o
             WHERE o.published_at IS NULL AND o.queue = %(queue)s
               AND o.producer_id > p.producer_id
             ORDER BY o.producer_id LIMIT 1)
      FROM producers p WHERE p.producer_id IS NOT NULL
)
SELECT w.id, w.notification_id, (SELECT n.recipient_id FROM notify_notification n
                                  WHERE n.id = w.notification_id), w.producer_id, w.due_at
FROM producers p
CROSS JOIN LATERAL (
    SELECT o.id, o.notification_id, o.producer_id, o.due_at FROM notify_outbox o
     WHERE o.published_at IS NULL AND o.queue = %(queue)s
       AND o.producer_id = p.producer_id AND o.due_at <= %(cutoff)s
     ORDER BY o.due_at, o.id LIMIT %(each)s
       FOR UPDATE SKIP LOCKED
) w
UNION ALL
SELECT w.id, w.notification_id, (SELECT n.recipient_id FROM notify_notification n
                                  WHERE n.id = w.notification_id), NULL, w.due_at
FROM (
    SELECT o.id, o.notification_id, o.due_at FROM notify_outbox o
     WHERE o.published_at IS NULL AND o.queue = %(queue)s
       AND o.producer_id IS NULL AND o.due_at <= %(cutoff)s
     ORDER BY o.due_at, o.id LIMIT %(each)s
       FOR UPDATE SKIP LOCKED
) w
ORDER BY due_at, id
"""


def _publish_class_fair(queue: str, limit: int, cutoff: datetime) -> tuple[int, bool]:
    """Publish what fits in the class's room, producers taking turns; (published, whether
    due rows were left waiting for room)."""
    state = _fair_states.setdefault(queue, _FairState())
    # Nothing due in the class (the relay's usual round: it wakes for every login code):
    # one probe of the waiting rows' index, and not the count of the class in flight.
    with connection.cursor() as cursor:
        cursor.execute(_DUE_SQL, {"queue": queue, "cutoff": cutoff})
        if cursor.fetchone() is None:
            return 0, False
    in_flight, rate, burst = _class_in_flight(queue, state)
    budget = fair_share_budget(
        window_seconds=settings.NOTIFY_OUTBOX_FAIR_WINDOW, rate=rate,
        in_flight=in_flight, most=limit, burst=burst,
        quiet_seconds=state.recent.quiet_seconds(),
    )  # fmt: skip
    with transaction.atomic():
        # Every producer's first `budget + 1` rows: enough to fill the budget from any of
        # them, and to know whether rows are left waiting for room.
        candidates = fair_rows_lock(queue=queue, cutoff=cutoff, each=budget + 1)
        waiting: dict[int | None, list[tuple]] = {}
        for row in candidates:
            waiting.setdefault(row[3], []).append(row)
        shares = fair_share_allocate(
            waiting={producer: len(rows) for producer, rows in waiting.items()},
            recent=state.recent.counts(),
            budget=budget,
        )
        chosen = [row for producer, n in shares.items() for row in waiting[producer][:n]]
        published = set(_publish_rows(queue, [row[:3] for row in chosen]))
    for row in chosen:
        if row[0] in published:
            state.recent.add(row[3], 1)
    state.unrouted.add([row[1] for row in chosen if row[0] in published])
    return len(published), len(chosen) < len(candidates)


def fair_rows_lock(*, queue: str, cutoff: datetime, each: int) -> list[tuple]:
    """Lock and return each producer's `each` oldest rows of `queue` due by `cutoff`
    (rows without a producer count as one producer), as (pk, notification id, recipient
    id, producer id, due_at) in due order; rows another relay holds are skipped. Call
    inside a transaction: the locks are what keep two relays from publishing a row twice."""
    with connection.cursor() as cursor:
        cursor.execute(_FAIR_ROWS_SQL, {"queue": queue, "cutoff": cutoff, "each": each})
        return cursor.fetchall()


def _class_in_flight(queue: str, state: _FairState) -> tuple[int, float | None, float]:
    """(rows of the class published and not routed + deliveries routed and not sent,
    the provider rate that paces them, its burst), in two statements at most."""
    unsent, rate, burst = import_string(settings.NOTIFY_OUTBOX_BACKLOG_SOURCE)(queue)
    remembered = state.unrouted.pending()
    unrouted: set[object] = set()
    if remembered:
        unrouted = set(
            Notification.objects.filter(pk__in=remembered, routed_at__isnull=True).values_list(
                "pk", flat=True
            )
        )
        state.unrouted.keep_only(unrouted)
    return unsent + len(unrouted), rate, burst


def _publish_rows(queue: str, rows: list[tuple]) -> list[int]:
    """Publish (pk, notification id, recipient id) rows as route batches and mark those
    the broker confirmed, inside the caller's transaction; the published pks."""
    published = _publish_batches(queue, rows)
    if published:
        # A publish the broker never took is not counted: the count is what the sweeper
        # reads to stop republishing a route that keeps dying, and a broker outage says
        # nothing about the route.
        Outbox.objects.filter(pk__in=published).update(
            published_at=timezone.now(), publish_attempts=F("publish_attempts") + 1
        )
    return published


def _publish_batches(queue: str, rows: list[tuple]) -> list[int]:
    """Publish (pk, notification id, recipient id) rows (in due order) as route
    batches; the pks the broker confirmed (all of them unless it went away)."""
    # One route message per batch of rows: what is queued together is routed together,
    # and a lone row goes at once as a batch of one. One person's rows are kept
    # together (in their order): their sends then go out in order inside one batch,
    # instead of each waiting for the one before it in another batch.
    rows = sorted(rows, key=lambda row: row[2] or 0)
    published: list[int] = []
    for batch in chunked(rows, batch_size_for(queue)):
        try:
            publish_task(
                settings.NOTIFY_OUTBOX_TASK,
                args=[[str(notification_id) for _, notification_id, _ in batch]],
                queue=queue,
                priority=settings.NOTIFY_PRIORITY_FIRST_ATTEMPT,
            )
        except Exception:  # the broker is away: keep the rest for the next round
            logger.exception("outbox relay: publish failed; retrying on the next round")
            break
        published.extend(pk for pk, _, _ in batch)
    return published


def relay_forever(
    *, should_stop: Callable[[], bool], queues: Sequence[str] = QUEUE_CLASSES
) -> None:
    """Publish whatever is pending (of `queues`), then sleep until a commit wakes us (or
    the poll interval passes, which also covers a lost NOTIFY and a broker that was
    away); while a fair class holds rows back for room, look again sooner."""
    listener = wake_listener()
    while not should_stop():
        held_back = False
        try:
            while True:
                result = outbox_publish_round(queues=queues)
                held_back = result.held_back
                if not result.more or held_back:
                    break  # nothing more now, or no room: wait (below)
        except Exception:  # the database is away: back off, then try again
            logger.exception("outbox relay: round failed")
        finally:
            connection.close()  # give the pooled connection back while we wait
        timeout = (
            settings.NOTIFY_OUTBOX_FAIR_RECHECK
            if held_back
            else settings.NOTIFY_OUTBOX_POLL_INTERVAL
        )
        try:
            # Wake-ups that arrive while publishing are queued on the socket, so none
            # is lost between the last round and this wait.
            for _ in listener.notifies(timeout=timeout, stop_after=1):
                pass
        except psycopg.Error:
            logger.warning("outbox relay: lost the LISTEN connection; reconnecting")
            listener.close()
            time.sleep(settings.NOTIFY_OUTBOX_POLL_INTERVAL)
            listener = wake_listener()
    listener.close()


def stop_on_signals() -> Callable[[], bool]:
    """SIGTERM/SIGINT end the loop after the current round (no half-published batch)."""
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    return stopping.is_set
