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
from collections.abc import Mapping, Sequence
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
    providers: Mapping[int, str]


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


def _shared_params() -> dict[str, str]:
    """The parameters every event statement binds: the channels' providers (the
    provider of an event no try names) and the person hash's key."""
    return {
        "providers": json.dumps(settings.NOTIFY_CHANNEL_PROVIDERS),
        "key": _person_key(),
    }


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
        "attempts": table("deliveries", "DeliveryAttempt"),
        "notifications": table("notify", "Notification"),
        "recipients": table("notify", "Recipient"),
        "categories": table("notify", "Category"),
        "feed": table("notify", "FeedEntry"),
    }


# The channel's provider (NOTIFY_CHANNEL_PROVIDERS: its primary when it fails over).
_CHANNEL_PROVIDER = "COALESCE(%(providers)s::jsonb ->> d.channel, '')"
_PERSON = "left(encode(sha256(convert_to(%(key)s || r.user_id, 'UTF8')), 'hex'), 32)"


def _columns(provider: str = _CHANNEL_PROVIDER) -> str:
    return f"""
           %(now)s, n.producer_id,
           CASE WHEN n.event_id LIKE 'campaign:%%' THEN split_part(n.event_id, ':', 2)::bigint END,
           c.key, d.channel, {provider}, d.id, n.id, {_PERSON}
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


def _provider_sql() -> str:
    """The provider that did it: the one this round's try went to (carried by the round,
    so a delivery handed over from the primary names the provider that took it); for
    provider news, the provider of the delivery's last try (one index probe of a round
    of one delivery); else the channel's."""
    attempts = _tables()["attempts"]
    return f"""COALESCE(
               NULLIF(v.provider, ''),
               CASE WHEN %(reported)s THEN
                   (SELECT NULLIF(a.provider, '') FROM {attempts} a
                     WHERE a.delivery_id = d.id AND a.accepted_at = d.accepted_at
                     ORDER BY a.number DESC LIMIT 1)
               END,
               {_CHANNEL_PROVIDER})"""


def _events_sql() -> str:
    t, joins = _tables(), _joins()
    columns = _columns(_provider_sql())
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
      FROM unnest(%(id)s::bigint[], %(month)s::timestamptz[], %(kind)s::text[],
                  %(provider)s::text[])
           AS v(id, month, kind, provider)
      JOIN {t["deliveries"]} d ON d.id = v.id AND d.accepted_at = v.month
      {joins}
    UNION ALL
    SELECT '{EventKind.ACCEPTED.value}', '', NULL, {_columns()}
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
    `sent`; each names the provider the round says its try went to (`providers`, so a
    delivery handed over from the primary names the one that took it). `notifications`:
    (id, created_at) of notifications just routed: each of their deliveries is
    `accepted` (the audience). `news`: (id, accepted_at, provider event kind) of
    provider news that changes no status. `reported`: the provider told us (its webhook,
    an SMS receipt), at `reported_at` when it said; a failure it reported as a hard
    bounce counts as `bounced`.
    """
    if not settings.NOTIFY_ANALYTICS_ENABLED:
        return 0
    reported = changes.reported
    providers = changes.providers
    rows: list[tuple[int, datetime, str, str]] = []
    for pk, month, status in changes.deliveries:
        provider = providers.get(pk, "")
        if not reported and status in TRIED_STATUSES:
            rows.append((pk, month, EventKind.SENT.value, provider))
        if status in KIND_BY_STATUS:
            rows.append((pk, month, KIND_BY_STATUS[status], provider))
    news = changes.news
    rows += [
        (pk, month, KIND_BY_NEWS[kind], "") for pk, month, kind in news if kind in KIND_BY_NEWS
    ]
    routed = changes.notifications
    if not rows and not routed:
        return 0
    if not _sql:
        _sql.append(_events_sql())
    params = {
        "id": [r[0] for r in rows],
        "month": [r[1] for r in rows],
        "kind": [str(r[2]) for r in rows],
        "provider": [r[3] for r in rows],
        "n_id": [n[0] for n in routed],
        "n_month": [n[1] for n in routed],
        "reported": reported,
        "at": changes.reported_at,
        "now": timezone.now(),
        **_shared_params(),
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
        SELECT '{EventKind.READ.value}', '', NULL, {_columns()}
          FROM {t["feed"]} f
          JOIN {t["deliveries"]} d ON d.notification_id = f.notification_id
                                  AND d.accepted_at = f.accepted_at AND d.channel = 'inapp'
          {_joins()}
         WHERE f.recipient_id = %(recipient)s AND f.read_at = %(now)s
        """)
    params = {
        "recipient": recipient_id,
        "now": read_at,
        **_shared_params(),
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
    t = _tables()
    return f"""
    INSERT INTO {t["events"]} {_INSERT}
    SELECT '{EventKind.UNSUBSCRIBED.value}', %(reason)s, NULL, %(now)s,
           COALESCE(n.producer_id, c.owner_id, r.created_by_id, 0),
           CASE WHEN n.event_id LIKE 'campaign:%%' THEN split_part(n.event_id, ':', 2)::bigint END,
           COALESCE(c.key, ''), COALESCE(d.channel, v.channel),
           CASE WHEN d.id IS NULL THEN '' ELSE COALESCE(
               (SELECT NULLIF(a.provider, '') FROM {t["attempts"]} a
                 WHERE a.delivery_id = d.id AND a.accepted_at = d.accepted_at
                 ORDER BY a.number DESC LIMIT 1),
               {_CHANNEL_PROVIDER}) END,
           d.id, n.id, {_PERSON}
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
        **_shared_params(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_UNSUBSCRIBED_SQL[0], params)
        return cursor.rowcount
