"""The events a person's own action makes: feed entries marked read (`read`) and a
category or channel turned off (`unsubscribed`). Each is written in the transaction of the
change, in one statement, as the pipeline's events are (analytics/events.py); none when
NOTIFY_ANALYTICS_ENABLED is off.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import connection

from analytics.events import (
    CHANNEL_PROVIDER_SQL,
    EVENT_INSERT,
    PERSON_SQL,
    event_columns_sql,
    event_joins_sql,
    event_tables,
    shared_params,
)
from analytics.models import EventKind

_reads_sql: list[str] = []


def analytics_reads_write(*, recipient_id: int, read_at: datetime) -> int:
    """Write a `read` event for each in-app delivery whose feed entry the person has just
    marked read (their entries with `read_at`, the time the marking wrote), in one
    statement; how many. Call in the marking's transaction."""
    if not settings.NOTIFY_ANALYTICS_ENABLED:
        return 0
    if not _reads_sql:
        t = event_tables()
        _reads_sql.append(f"""
        INSERT INTO {t["events"]} {EVENT_INSERT}
        SELECT '{EventKind.READ.value}', '', NULL, {event_columns_sql()}
          FROM {t["feed"]} f
          JOIN {t["deliveries"]} d ON d.notification_id = f.notification_id
                                  AND d.accepted_at = f.accepted_at AND d.channel = 'inapp'
          {event_joins_sql()}
         WHERE f.recipient_id = %(recipient)s AND f.read_at = %(now)s
        """)
    params = {
        "recipient": recipient_id,
        "now": read_at,
        **shared_params(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_reads_sql[0], params)
        return cursor.rowcount


# One `unsubscribed` event per cell the person turned off: the delivery whose link it
# was, when the link named one (its producer, campaign, category, channel and provider);
# else the category's owner, or the producer that registered the person. `category`
# NULL: all marketing.
_UNSUBSCRIBED_SQL: list[str] = []


def _unsubscribed_sql() -> str:
    t = event_tables()
    return f"""
    INSERT INTO {t["events"]} {EVENT_INSERT}
    SELECT '{EventKind.UNSUBSCRIBED.value}', %(reason)s, NULL, %(now)s,
           COALESCE(n.producer_id, c.owner_id, r.created_by_id, 0),
           CASE WHEN n.event_id LIKE 'campaign:%%' THEN split_part(n.event_id, ':', 2)::bigint END,
           COALESCE(c.key, ''), COALESCE(d.channel, v.channel),
           CASE WHEN d.id IS NULL THEN '' ELSE COALESCE(
               (SELECT NULLIF(a.provider, '') FROM {t["attempts"]} a
                 WHERE a.delivery_id = d.id AND a.accepted_at = d.accepted_at
                 ORDER BY a.number DESC LIMIT 1),
               {CHANNEL_PROVIDER_SQL}) END,
           d.id, n.id, {PERSON_SQL}
      FROM unnest(%(category)s::bigint[], %(channel)s::text[]) AS v(category_id, channel)
      JOIN {t["recipients"]} r ON r.id = %(recipient)s
      LEFT JOIN {t["categories"]} c ON c.id = v.category_id
      LEFT JOIN {t["deliveries"]} d ON d.id = %(delivery)s AND d.accepted_at = %(month)s
      LEFT JOIN {t["notifications"]} n ON n.id = d.notification_id AND n.created_at = d.accepted_at
    """


def analytics_unsubscribed_write(
    *,
    recipient_id: int,
    cells: Sequence[tuple[int | None, str]],
    reason: str,
    at: datetime,
    delivery: tuple[int, datetime] | None = None,
) -> int:
    """Write an `unsubscribed` event for each (category id, channel) the person has just
    turned off, in one statement; how many. Call in the transaction of the change.

    `reason`: where it came from (the consent source: the email's link, the preference
    center, a spam complaint…). `delivery`: (id, accepted_at) of the message whose link
    or complaint it was, when known: the event then names its producer, campaign and
    provider, so a campaign's report counts it. A category None is all marketing, a
    channel "" every channel."""
    if not settings.NOTIFY_ANALYTICS_ENABLED or not cells:
        return 0
    if not _UNSUBSCRIBED_SQL:
        _UNSUBSCRIBED_SQL.append(_unsubscribed_sql())
    params = {
        "category": [category for category, _ in cells],
        "channel": [channel for _, channel in cells],
        "recipient": recipient_id,
        "delivery": delivery[0] if delivery else None,
        "month": delivery[1] if delivery else None,
        "reason": reason[:32],
        "now": at,
        **shared_params(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_UNSUBSCRIBED_SQL[0], params)
        return cursor.rowcount
