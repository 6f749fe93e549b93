"""The outbox relay: publishes route tasks for accepted notifications, in batches.

Intake writes a notification and its outbox row in one transaction and returns; it
never waits for the broker. This long-running process (`manage.py outbox_relay`, the
`relay` process type) is woken by PostgreSQL's NOTIFY when such a transaction commits,
takes the unpublished rows with `FOR UPDATE SKIP LOCKED` (several relays can run),
publishes each with publisher confirms, and marks the batch published in one UPDATE.

No loss: a row is marked only after the broker confirmed its message, in the same
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
from datetime import datetime, timedelta

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from notify.broker import batch_size_for, chunked, publish_task
from notify.models import Outbox

logger = logging.getLogger(__name__)

WAKE_CHANNEL = "notify_outbox"  # the trigger of migration 0004 notifies this channel


QUEUE_CLASSES = ("high", "medium", "low")


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
    up a login code's).
    """
    cutoff = timezone.now() - timedelta(seconds=older_than)
    limits = {
        "high": settings.NOTIFY_OUTBOX_BATCH,
        "medium": settings.NOTIFY_OUTBOX_BATCH,
        "low": settings.NOTIFY_OUTBOX_LOW_BATCH,
    }
    return sum(_publish_class(queue, limits[queue], cutoff) for queue in queues)


def _publish_class(queue: str, limit: int, cutoff: datetime) -> int:
    """Publish up to `limit` due rows of one queue class, oldest first, and mark them."""
    with transaction.atomic():
        rows = list(
            Outbox.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(published_at__isnull=True, queue=queue, due_at__lte=cutoff)
            .order_by("due_at")
            .values_list("pk", "notification_id", "notification__recipient_id")[:limit]
        )
        # One route message per batch of rows: what is queued together is routed together,
        # and a lone row goes at once as a batch of one. One person's rows are kept
        # together (in their order): their sends then go out in order inside one batch,
        # instead of each waiting for the one before it in another batch.
        rows.sort(key=lambda row: row[2] or 0)
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
        now = timezone.now()
        if published:
            Outbox.objects.filter(pk__in=published).update(
                published_at=now, publish_attempts=F("publish_attempts") + 1
            )
    # A publish the broker never took is not counted: the count is what the sweeper reads
    # to stop republishing a route that keeps dying, and a broker outage says nothing
    # about the route.
    return len(published)


def relay_forever(
    *, should_stop: Callable[[], bool], queues: Sequence[str] = QUEUE_CLASSES
) -> None:
    """Publish whatever is pending (of `queues`), then sleep until a commit wakes us (or
    the poll interval passes, which also covers a lost NOTIFY and a broker that was
    away)."""
    listener = _listen()
    while not should_stop():
        try:
            while outbox_publish_pending(queues=queues):
                pass  # something went out: there may be more right away
        except Exception:  # the database is away: back off, then try again
            logger.exception("outbox relay: round failed")
        finally:
            connection.close()  # give the pooled connection back while we wait
        try:
            # Wake-ups that arrive while publishing are queued on the socket, so none
            # is lost between the last round and this wait.
            for _ in listener.notifies(timeout=settings.NOTIFY_OUTBOX_POLL_INTERVAL, stop_after=1):
                pass
        except psycopg.Error:
            logger.warning("outbox relay: lost the LISTEN connection; reconnecting")
            listener.close()
            time.sleep(settings.NOTIFY_OUTBOX_POLL_INTERVAL)
            listener = _listen()
    listener.close()


def _listen() -> psycopg.Connection:
    """A dedicated autocommit connection that LISTENs for outbox inserts."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    listener = psycopg.connect(**params, autocommit=True)
    listener.execute(f"LISTEN {WAKE_CHANNEL}")
    return listener


def stop_on_signals() -> Callable[[], bool]:
    """SIGTERM/SIGINT end the loop after the current round (no half-published batch)."""
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    return stopping.is_set
