"""Delivery events, written where the change is written: one statement per round.

A round that changes deliveries (routing, the quiet-hours release, the outcome step,
provider news, an SMS receipt) announces its changes (`deliveries.changes`) inside its
own transaction, and `analytics_events_write` hears them: one INSERT…SELECT writes every
event of the round, so the event exists exactly when the change does. Marking feed
entries read writes their `read` events likewise (`analytics_reads_write`). With
NOTIFY_ANALYTICS_ENABLED off, or nothing to count, no statement runs. The `analytics`
process ships the rows to the store (analytics/store/shipper.py).

This module is below the ground floor (under `flow`): `notify`, `preferences` and
`deliveries` all call it, so it imports none of them and names their tables through
the app registry.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Protocol

from django.apps import apps
from django.conf import settings
from django.db import connection
from django.utils import timezone

from analytics.models import AnalyticsEvent, EventKind


class RoundChanges(Protocol):
    """What deliveries.changes announces (this module stands below deliveries, so it
    names the shape rather than importing it)."""

    deliveries: list[tuple[int, datetime, str]]
    notifications: list[tuple[object, datetime]]
    news: list[tuple[int, datetime, str]]
    reported: bool
    reported_at: datetime | None


# A delivery's status as written → what it counts (other statuses count nothing).
KIND_BY_STATUS: dict[str, str] = {
    "suppressed": EventKind.SUPPRESSED,
    "digesting": EventKind.DIGESTED,
    "delivered": EventKind.DELIVERED,
    "reached": EventKind.REACHED,
    "failed": EventKind.FAILED,
    "dead": EventKind.FAILED,
    "expired": EventKind.FAILED,
}
# A status an attempt's outcome writes: each is one try at the provider (`sent`), unless
# the provider itself reported it (then it is news about an earlier try).
TRIED_STATUSES = frozenset({"delivered", "retrying", "failed", "dead"})
# Provider news that changes no status (a spam complaint, an open, a click), by its kind.
KIND_BY_NEWS: dict[str, str] = {
    "complained": EventKind.COMPLAINED,
    "opened": EventKind.OPENED,
    "clicked": EventKind.CLICKED,
}
# The reason a delivery fails with when its provider reported a hard bounce.
BOUNCED_REASON = "bounced"


def _person_key() -> str:
    """The key of the person hash, for Python and the SQL alike. Not notify.erasure's
    hash: the SQL computes this one as it writes, so its form is fixed here."""
    return f"{settings.NOTIFY_ERASURE_KEY}:analytics:"


def person_hash(user_id: str) -> str:
    """The keyed hash that stands for a person in the store (the same as the SQL's)."""
    return hashlib.sha256((_person_key() + user_id).encode()).hexdigest()[:32]


def queued_oldest_at() -> datetime | None:
    """When the oldest event still waiting to be shipped happened (None: none waits)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT occurred_at FROM {AnalyticsEvent._meta.db_table} ORDER BY id LIMIT 1"
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _tables() -> dict[str, str]:
    def table(label: str, model: str) -> str:
        return apps.get_model(label, model)._meta.db_table

    return {
        "events": AnalyticsEvent._meta.db_table,
        "deliveries": table("deliveries", "Delivery"),
        "notifications": table("notify", "Notification"),
        "recipients": table("notify", "Recipient"),
        "categories": table("notify", "Category"),
        "feed": table("notify", "FeedEntry"),
    }


_COLUMNS = """
           %(now)s, n.producer_id,
           CASE WHEN n.event_id LIKE 'campaign:%%' THEN split_part(n.event_id, ':', 2)::bigint END,
           c.key, d.channel, COALESCE(%(providers)s::jsonb ->> d.channel, ''),
           d.id, n.id, left(encode(sha256(convert_to(%(key)s || r.user_id, 'UTF8')), 'hex'), 32)
"""
_INSERT = """(kind, reason, latency_ms, occurred_at, producer_id, campaign_id,
              category, channel, provider, delivery_id, notification_id, person)"""


def _joins() -> str:
    t = _tables()
    return f"""
      JOIN {t["notifications"]} n ON n.id = d.notification_id AND n.created_at = d.accepted_at
      JOIN {t["recipients"]} r ON r.id = n.recipient_id
      JOIN {t["categories"]} c ON c.id = n.category_id
    """


def _events_sql() -> str:
    t, columns, joins = _tables(), _COLUMNS, _joins()
    return f"""
    INSERT INTO {t["events"]} {_INSERT}
    SELECT CASE WHEN v.kind = 'failed' AND d.reason = '{BOUNCED_REASON}' AND %(reported)s
                THEN '{EventKind.BOUNCED.value}' ELSE v.kind END,
           CASE WHEN v.kind IN ('suppressed', 'failed') THEN d.reason ELSE '' END,
           CASE v.kind
               WHEN 'delivered' THEN (extract(epoch FROM %(now)s - d.accepted_at) * 1000)::bigint
               WHEN 'reached' THEN (extract(epoch FROM COALESCE(%(at)s, %(now)s)
                                    - COALESCE(d.finished_at, d.accepted_at)) * 1000)::bigint
           END,
           {columns}
      FROM unnest(%(id)s::bigint[], %(month)s::timestamptz[], %(kind)s::text[])
           AS v(id, month, kind)
      JOIN {t["deliveries"]} d ON d.id = v.id AND d.accepted_at = v.month
      {joins}
    UNION ALL
    SELECT '{EventKind.ACCEPTED.value}', '', NULL, {columns}
      FROM unnest(%(n_id)s::uuid[], %(n_month)s::timestamptz[]) AS v(id, month)
      JOIN {t["deliveries"]} d ON d.notification_id = v.id AND d.accepted_at = v.month
      {joins}
    """


_sql: list[str] = []


def analytics_events_write(changes: RoundChanges) -> int:
    """Write the events of a round the pipeline announced, in one statement; how many.

    It is a listener of `deliveries.changes` (registered by `analytics.wiring`), so it
    takes what every announcement carries (`RoundChanges`). `deliveries`: (id, accepted_at, status
    written); each status that counts (`KIND_BY_STATUS`) is one event, and a try's
    outcome (delivered, retrying, failed or dead, not told by the provider) is also
    `sent`. `notifications`: (id, created_at) of notifications just routed: each of
    their deliveries is `accepted` (the audience). `news`: (id, accepted_at, provider
    event kind) of provider news that changes no status. `reported`: the provider told
    us (its webhook, an SMS receipt), at `reported_at` when it said; a failure it
    reported as a hard bounce counts as `bounced`.
    """
    if not settings.NOTIFY_ANALYTICS_ENABLED:
        return 0
    reported = changes.reported
    rows: list[tuple[int, datetime, str]] = []
    for pk, month, status in changes.deliveries:
        if not reported and status in TRIED_STATUSES:
            rows.append((pk, month, EventKind.SENT.value))
        if status in KIND_BY_STATUS:
            rows.append((pk, month, KIND_BY_STATUS[status]))
    news = changes.news
    rows += [(pk, month, KIND_BY_NEWS[kind]) for pk, month, kind in news if kind in KIND_BY_NEWS]
    routed = changes.notifications
    if not rows and not routed:
        return 0
    if not _sql:
        _sql.append(_events_sql())
    params = {
        "id": [r[0] for r in rows],
        "month": [r[1] for r in rows],
        "kind": [str(r[2]) for r in rows],
        "n_id": [n[0] for n in routed],
        "n_month": [n[1] for n in routed],
        "reported": reported,
        "at": changes.reported_at,
        "now": timezone.now(),
        "providers": json.dumps(settings.NOTIFY_CHANNEL_PROVIDERS),
        "key": _person_key(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_sql[0], params)
        return cursor.rowcount


_reads_sql: list[str] = []


def analytics_reads_write(*, recipient_id: int, read_at: datetime) -> int:
    """Write a `read` event for each in-app delivery whose feed entry the person has just
    marked read (their entries with `read_at`, the time the marking wrote), in one
    statement; how many. Call in the marking's transaction."""
    if not settings.NOTIFY_ANALYTICS_ENABLED:
        return 0
    if not _reads_sql:
        t = _tables()
        _reads_sql.append(f"""
        INSERT INTO {t["events"]} {_INSERT}
        SELECT '{EventKind.READ.value}', '', NULL, {_COLUMNS}
          FROM {t["feed"]} f
          JOIN {t["deliveries"]} d ON d.notification_id = f.notification_id
                                  AND d.accepted_at = f.accepted_at AND d.channel = 'inapp'
          {_joins()}
         WHERE f.recipient_id = %(recipient)s AND f.read_at = %(now)s
        """)
    params = {
        "recipient": recipient_id,
        "now": read_at,
        "providers": json.dumps(settings.NOTIFY_CHANNEL_PROVIDERS),
        "key": _person_key(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_reads_sql[0], params)
        return cursor.rowcount
