"""Digests and delays with a condition: fewer, better notifications.

A category may digest a channel (`Category.digest_windows`): the route writes each
event's delivery on that channel as `digesting` and files it in the recipient's open
window (one upsert for the batch, `digest_items_file`); when the window is due,
`digests_close` turns it into one delivery — the last event's, the *carrier* — through
the gate again (consent withdrawn meanwhile drops the items, quiet hours defer the
carrier), and marks every other item `digested`. The sender renders the carrier with
the window's events (`digest_contexts_attach`). Windows live in PostgreSQL only: see
docs/digests.md for why, and for what a kill at any point leaves behind.

A category may also delay a channel until the in-app entry is read
(`Category.delays_if_unread`): the route writes that delivery `deferred` with the delay
as its reason, and the quiet-hours release (deliveries/pipeline/release.py) skips it as
`skipped_read` when its feed entry was read by then, else passes it to the gate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from deliveries.models import (
    Delivery,
    DeliveryStatus,
    DigestItem,
    DigestWindow,
    DigestWindowState,
    Reason,
)
from deliveries.pipeline.live import feed_entries_seen_by
from notify.broker import publish_task
from notify.models import Category, FeedEntry, Notification
from pgarrays import array_literal
from templates_admin.rendering import digest_context

logger = logging.getLogger(__name__)

CLOSE_TASK = "deliveries.digests_close"
RELEASE_TASK = "deliveries.release_deferred"
# Campaign notifications are made with event ids under this prefix (campaigns.models):
# a campaign is one message to many people, never an event to gather.
CAMPAIGN_EVENT_PREFIX = "campaign:"


def digest_window_seconds(notification: Notification, channel: str) -> float | None:
    """How long the window this notification's delivery on `channel` joins stays open,
    or None when that channel is not digested for it (mandatory categories and campaign
    notifications never are)."""
    if notification.event_id.startswith(CAMPAIGN_EVENT_PREFIX):
        return None
    seconds = notification.category.digest_window_for(channel)
    return seconds * settings.NOTIFY_DIGEST_TIME_SCALE if seconds else None


def unread_delay_seconds(notification: Notification, channel: str) -> float | None:
    """How long this notification's delivery on `channel` waits for its in-app entry to
    be read before it goes, or None (it goes at once)."""
    if notification.event_id.startswith(CAMPAIGN_EVENT_PREFIX):
        return None
    seconds = notification.category.delay_if_unread_for(channel)
    return seconds * settings.NOTIFY_DIGEST_TIME_SCALE if seconds else None


def category_timing_problem(notification: Notification, channel: str, now: datetime) -> str | None:
    """Why this notification's digest window or delay on `channel` cannot be computed (a
    message), or None. Validation bounds both at every save, but a row written past it (by
    hand, or before the bounds) may hold a value no date can be computed from; that must
    fail this notification's delivery alone, not the route batch it rides in."""
    try:
        for seconds in (
            digest_window_seconds(notification, channel),
            unread_delay_seconds(notification, channel),
        ):
            if seconds is not None:
                now + timedelta(seconds=seconds)
    except (OverflowError, ValueError, TypeError) as error:
        return f"{notification.category.key} on {channel}: {error}"
    return None


def digest_key_of(notification: Notification) -> str:
    """The value that splits this notification's digests (the category's digest key
    field in its payload), or "" (one window per recipient and channel)."""
    field = notification.category.digest_key
    value = notification.payload.get(field) if field else None
    return "" if value is None else str(value)[:200]


@dataclass(frozen=True)
class Filed:
    """A digesting delivery just written by the route, to file in its window."""

    notification: Notification
    delivery_id: int
    channel: str
    window_seconds: float


_FILE_SQL = f"""
WITH v AS (
    SELECT * FROM unnest(%(recipients)s::bigint[], %(categories)s::bigint[],
                         %(channels)s::varchar[], %(keys)s::varchar[],
                         %(closes)s::timestamptz[], %(deliveries)s::bigint[],
                         %(notifications)s::uuid[], %(months)s::timestamptz[],
                         %(occurred)s::timestamptz[])
      AS v(recipient_id, category_id, channel, digest_key, closes_at, delivery_id,
           notification_id, accepted_at, occurred_at)
), w AS (
    INSERT INTO {DigestWindow._meta.db_table} AS dw
           (recipient_id, category_id, channel, digest_key, state, opened_at, closes_at,
            items_count)
    SELECT recipient_id, category_id, channel, digest_key, 'open', %(now)s, min(closes_at),
           count(*)
      FROM v GROUP BY recipient_id, category_id, channel, digest_key
    ON CONFLICT (recipient_id, category_id, channel, digest_key) WHERE state = 'open'
    DO UPDATE SET items_count = dw.items_count + EXCLUDED.items_count
    RETURNING id, recipient_id, category_id, channel, digest_key, xmax = 0 AS opened, closes_at
), i AS (
    INSERT INTO {DigestItem._meta.db_table}
           (window_id, delivery_id, notification_id, accepted_at, occurred_at)
    SELECT w.id, v.delivery_id, v.notification_id, v.accepted_at, v.occurred_at
      FROM v JOIN w USING (recipient_id, category_id, channel, digest_key)
    ON CONFLICT (delivery_id) DO NOTHING
)
SELECT closes_at FROM w WHERE opened
"""


def digest_items_file(*, filed: Sequence[Filed], now: datetime) -> list[datetime]:
    """File a route batch's digesting deliveries in their recipients' open windows,
    opening the windows that are not open yet — one statement for the batch, inside the
    route's transaction (so a window never lists a delivery that was not written).

    The upsert takes the open window's row lock until the route commits, so a close
    that runs meanwhile skips that window (it is locked) and takes it, with this batch's
    items, at its next run. Returns when each window it opened closes.
    """
    if not filed:
        return []
    columns: dict[str, list] = {
        name: []
        for name in (
            "recipients", "categories", "channels", "keys", "closes", "deliveries",
            "notifications", "months", "occurred",
        )
    }  # fmt: skip
    for item in filed:
        n = item.notification
        columns["recipients"].append(n.recipient_id)
        columns["categories"].append(n.category_id)
        columns["channels"].append(item.channel)
        columns["keys"].append(digest_key_of(n))
        columns["closes"].append(now + timedelta(seconds=item.window_seconds))
        columns["deliveries"].append(item.delivery_id)
        columns["notifications"].append(n.pk)
        columns["months"].append(n.created_at)
        columns["occurred"].append(n.occurred_at or n.created_at)
    params = {name: array_literal(values) for name, values in columns.items()}
    params["now"] = now
    with connection.cursor() as cursor:
        cursor.execute(_FILE_SQL, params)
        return [closes_at for (closes_at,) in cursor.fetchall()]


def wakeups_publish(*, closes: Sequence[datetime], delayed: Sequence[datetime], queue: str) -> None:
    """After the route commits: a countdown to each newly opened window's close and to
    the end of each delay, so they happen on time without waiting for beat. Waits longer
    than NOTIFY_DIGEST_COUNTDOWN_MAX are left to beat (a countdown is held by a worker,
    and RabbitMQ's consumer timeout bounds how long). One message per distinct second:
    the task handles everything due, so a batch's windows share their wake-up."""
    now = timezone.now()
    for task, due in ((CLOSE_TASK, closes), (RELEASE_TASK, delayed)):
        seconds = sorted({max(0, round((at - now).total_seconds() + 0.5)) for at in due})
        for countdown in seconds:
            if countdown > settings.NOTIFY_DIGEST_COUNTDOWN_MAX:
                continue
            try:
                publish_task(task, args=[], queue=queue, countdown=countdown,
                             priority=settings.NOTIFY_PRIORITY_RETRY)  # fmt: skip
            except Exception:  # beat's run covers it; the rows are the record
                logger.warning("could not publish %s in %s s; beat will", task, countdown)


# --- The sender's side -----------------------------------------------------------------

# The carrier and the items its close marked `digested` (an item cancelled or erased
# before the close is not listed).
_EVENTS_SQL = f"""
SELECT w.carrier_id, n.payload, i.occurred_at
  FROM {DigestWindow._meta.db_table} w
  JOIN {DigestItem._meta.db_table} i ON i.window_id = w.id
  JOIN {Delivery._meta.db_table} d ON d.id = i.delivery_id AND d.accepted_at = i.accepted_at
  JOIN {Notification._meta.db_table} n ON n.id = i.notification_id AND n.created_at = i.accepted_at
 WHERE w.carrier_id = ANY(%(ids)s::bigint[])
   AND (i.delivery_id = w.carrier_id OR d.status = '{DeliveryStatus.DIGESTED.value}')
 ORDER BY w.carrier_id, i.occurred_at, i.accepted_at, i.delivery_id
"""


def _digested(category: Category, channel: str) -> bool:
    return bool(category.digest_windows) and channel in category.digest_windows


def digest_contexts_attach(deliveries: Sequence[Delivery]) -> None:
    """Give each digest carrier among these deliveries (loaded with their notification
    and category) its window's events, as `delivery.digest_context` — one statement, and
    only when one of them is on a channel its category digests (nothing otherwise)."""
    candidates = {d.pk: d for d in deliveries if _digested(d.notification.category, d.channel)}
    if not candidates:
        return
    events: dict[int, list[tuple[dict, datetime]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(_EVENTS_SQL, {"ids": array_literal(list(candidates))})
        for carrier_id, payload, occurred_at in cursor.fetchall():
            # Django reads jsonb as text (JSONField decodes it): so does this raw query.
            payload = json.loads(payload) if isinstance(payload, str) else payload
            events.setdefault(carrier_id, []).append((payload, occurred_at))
    for carrier_id, found in events.items():
        candidates[carrier_id].digest_context = digest_context(
            found, count=len(found), limit=settings.NOTIFY_DIGEST_EVENTS_MAX
        )


# --- Delays if unread --------------------------------------------------------------------


def read_before_delay_end(deliveries: Sequence[Delivery]) -> dict[int, str]:
    """Of these deliveries delayed until their in-app entry is read, those whose entry
    the person read by now, with the reason to record: marked read (`read_in_app`, one
    query), or shown to them on the live stream (`seen_live`, one Redis round trip for
    the entries not marked read)."""
    delayed = {
        d.pk: (d.notification_id, d.accepted_at)
        for d in deliveries
        if d.reason == Reason.DELAYED_IF_UNREAD
    }
    if not delayed:
        return {}
    entries = {
        notification_id: (entry_id, recipient_id, read_at)
        for entry_id, notification_id, recipient_id, read_at in FeedEntry.objects.filter(
            notification_id__in=[n for n, _ in delayed.values()],
            accepted_at__in=list({m for _, m in delayed.values()}),
        ).values_list("pk", "notification_id", "recipient_id", "read_at")
    }
    seen = feed_entries_seen_by(
        [(recipient_id, entry_id) for entry_id, recipient_id, read_at in entries.values()
         if read_at is None]
    )  # fmt: skip
    found: dict[int, str] = {}
    for pk, (notification_id, _) in delayed.items():
        entry_id, _, read_at = entries.get(notification_id, (None, None, None))
        if read_at is not None:
            found[pk] = Reason.READ_IN_APP
        elif entry_id in seen:
            found[pk] = Reason.SEEN_LIVE
    return found


# --- Retention ---------------------------------------------------------------------------


def digests_retire(*, deliveries_partition: str, month_end: datetime) -> tuple[int, int]:
    """Before a month of deliveries is dropped (history retention): the digest items of
    its deliveries go, and so does every closed window closed before the month's end that
    is left with no item — two statements, whatever the month's size. A window whose
    other items are in a later month stays until that month goes; an open window is the
    close's to end. Returns (items, windows) deleted."""
    items_table, windows_table = DigestItem._meta.db_table, DigestWindow._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {items_table} i USING {deliveries_partition} d "
            "WHERE i.delivery_id = d.id AND i.accepted_at = d.accepted_at"
        )
        items = cursor.rowcount
        cursor.execute(
            f"DELETE FROM {windows_table} w WHERE w.state <> %(open)s "
            "AND w.closed_at < %(end)s "
            f"AND NOT EXISTS (SELECT 1 FROM {items_table} i WHERE i.window_id = w.id)",
            {"open": DigestWindowState.OPEN.value, "end": month_end},
        )
        return items, cursor.rowcount
