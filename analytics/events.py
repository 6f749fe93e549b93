"""Delivery events, written where the change is written: one statement per round at most.

A round that changes deliveries (routing, the quiet-hours release, the outcome step,
provider news, an SMS receipt) announces its changes (`deliveries.changes`) inside its
own transaction, and `analytics_events_write` hears them: one INSERT writes every
event of the round, so the event exists exactly when the change does. The senders'
rounds take that INSERT into their record statement instead (`analytics_events_ride`).
The route and the senders' rounds carry what their events name (the notification,
person and category they loaded), so theirs is a plain INSERT of arrays that reads no
table; the other rounds' INSERT…SELECT reads the deliveries back. A person's own actions
(reads, unsubscribes) write theirs likewise (analytics/person_events.py). With
NOTIFY_ANALYTICS_ENABLED off, or nothing to count, no statement runs. The `analytics`
process ships the rows to the store (analytics/store/shipper.py).

This module is below the ground floor (under `flow`): `notify`, `preferences` and
`deliveries` all call it, so it imports none of them and names their tables through
the app registry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Protocol

from django.apps import apps
from django.conf import settings
from django.db import connection
from django.utils import timezone

from analytics.models import AnalyticsEvent, EventKind
from pgarrays import array_literal, planned_once


class Subject(Protocol):
    """What a changed delivery is about, as its round had it (deliveries.changes)."""

    producer_id: int
    event_id: str
    category: str
    channel: str
    notification_id: object
    user_id: str
    reason: str


class RoundChanges(Protocol):
    """What deliveries.changes announces (this module stands below deliveries, so it
    names the shape rather than importing it)."""

    deliveries: list[tuple[int, datetime, str]]
    notifications: list[tuple[object, datetime]]
    news: list[tuple[int, datetime, str]]
    reported: bool
    reported_at: datetime | None
    providers: Mapping[int, str]
    created: list[tuple[int, datetime]] | None
    subjects: Mapping[int, Subject]
    ridden: frozenset[int]


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
# the provider itself reported it (then it is news about an earlier try). A `delivered`
# is always a try's outcome, so its row stands for the `sent` too: the shipper writes
# both into the store (analytics/store/shipper.py), and the queue takes one row, not two.
UNDELIVERED_TRIES = frozenset({"retrying", "failed", "dead"})
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


def shared_params() -> dict[str, str]:
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


def event_tables() -> dict[str, str]:
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
CHANNEL_PROVIDER_SQL = "COALESCE(%(providers)s::jsonb ->> d.channel, '')"
PERSON_SQL = "left(encode(sha256(convert_to(%(key)s || r.user_id, 'UTF8')), 'hex'), 32)"


def event_columns_sql(provider: str = CHANNEL_PROVIDER_SQL) -> str:
    return f"""
           %(now)s, n.producer_id,
           CASE WHEN n.event_id LIKE 'campaign:%%' THEN split_part(n.event_id, ':', 2)::bigint END,
           c.key, d.channel, {provider}, d.id, n.id, {PERSON_SQL}
"""


# The queue's columns every event statement writes, in the order its SELECTs give them.
EVENT_INSERT_COLUMNS = (
    "kind", "reason", "latency_ms", "occurred_at", "producer_id", "campaign_id",
    "category", "channel", "provider", "delivery_id", "notification_id", "person",
)  # fmt: skip
EVENT_INSERT = f"({', '.join(EVENT_INSERT_COLUMNS)})"


def event_joins_sql() -> str:
    t = event_tables()
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
    attempts = event_tables()["attempts"]
    return f"""COALESCE(
               NULLIF(v.provider, ''),
               CASE WHEN %(reported)s THEN
                   (SELECT NULLIF(a.provider, '') FROM {attempts} a
                     WHERE a.delivery_id = d.id AND a.accepted_at = d.accepted_at
                     ORDER BY a.number DESC LIMIT 1)
               END,
               {CHANNEL_PROVIDER_SQL})"""


def _events_sql() -> str:
    t, joins = event_tables(), event_joins_sql()
    columns = event_columns_sql(_provider_sql())
    return f"""
    INSERT INTO {t["events"]} {EVENT_INSERT}
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
    SELECT '{EventKind.ACCEPTED.value}', '', NULL, {event_columns_sql()}
      FROM unnest(%(n_id)s::uuid[], %(n_month)s::timestamptz[]) AS v(id, month)
      JOIN {t["deliveries"]} d ON d.notification_id = v.id AND d.accepted_at = v.month
      {joins}
    """


_sql: list[str] = []


def analytics_events_write(changes: RoundChanges) -> int:
    """Write the events of a round the pipeline announced, in one statement; how many.

    It is a listener of `deliveries.changes` (registered by `analytics.wiring`), so it
    takes what every announcement carries (`RoundChanges`). `deliveries`: (id,
    accepted_at, status written); each status that counts (`KIND_BY_STATUS`) is one
    event, and a try's outcome (delivered, retrying, failed or dead, not told by the
    provider) is also `sent` (a `delivered` row stands for it: the shipper writes both);
    each names the provider the round says its try went to (`providers`, so a delivery
    handed over from the primary names the one that took it). `notifications`: (id,
    created_at) of notifications just routed: each of their deliveries is `accepted`
    (the audience). `news`: (id, accepted_at, provider event kind) of provider news that
    changes no status. `reported`: the provider told us (its webhook, an SMS receipt), at
    `reported_at` when it said; a failure it reported as a hard bounce counts as
    `bounced`. A round that carries its deliveries' subjects and the deliveries it
    created writes them as they are (`_carried_write`); any other reads them back.
    Events of `ridden` deliveries were written by `analytics_events_ride` already.
    """
    if not settings.NOTIFY_ANALYTICS_ENABLED:
        return 0
    rows = _event_rows(changes)
    if changes.ridden:  # written already, inside the round's own statement
        rows = [row for row in rows if row[0] not in changes.ridden]
    routed = changes.notifications
    if not rows and not routed:
        return 0
    if _carried(changes, rows):
        return _carried_write(changes, rows)
    reported = changes.reported
    if not _sql:
        _sql.append(_events_sql())
    params = {
        "id": array_literal([r[0] for r in rows]),
        "month": array_literal([r[1] for r in rows]),
        "kind": array_literal([str(r[2]) for r in rows]),
        "provider": array_literal([r[3] for r in rows]),
        "n_id": array_literal([n[0] for n in routed]),
        "n_month": array_literal([n[1] for n in routed]),
        "reported": reported,
        "at": changes.reported_at,
        "now": timezone.now(),
        **shared_params(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_sql[0], params)
        return cursor.rowcount


def _event_rows(changes: RoundChanges) -> list[tuple[int, datetime, str, str]]:
    """(delivery id, accepted_at, kind, provider of this round's try) of every event
    the round's status changes and provider news count, accepted aside."""
    reported = changes.reported
    providers = changes.providers
    rows: list[tuple[int, datetime, str, str]] = []
    for pk, month, status in changes.deliveries:
        provider = providers.get(pk, "")
        if not reported and status in UNDELIVERED_TRIES:
            rows.append((pk, month, EventKind.SENT.value, provider))
        if status in KIND_BY_STATUS:
            rows.append((pk, month, KIND_BY_STATUS[status], provider))
    news = changes.news
    rows += [
        (pk, month, KIND_BY_NEWS[kind], "") for pk, month, kind in news if kind in KIND_BY_NEWS
    ]
    return rows


def _carried(changes: RoundChanges, rows: Sequence[tuple]) -> bool:
    """Whether the round carried all the events need (the route and the senders' rounds
    do): then nothing is read back. A provider's report (its bounce is told by the
    delivery's reason, its reach by when the delivery was handed over) is read back."""
    if changes.reported or changes.news:
        return False
    if changes.notifications and changes.created is None:
        return False
    subjects = changes.subjects
    return all(row[0] in subjects for row in rows) and all(
        pk in subjects for pk, _ in changes.created or ()
    )


# The carried columns, each with its array's type.
_COLUMNS = {
    "kind": "text", "reason": "text", "latency_ms": "bigint", "producer_id": "bigint",
    "campaign_id": "bigint", "category": "text", "channel": "text", "provider": "text",
    "delivery_id": "bigint", "notification_id": "uuid", "person": "text",
}  # fmt: skip
# ...and an `accepted` row's second delivery (the route's rows only: see `_accepted_paired`).
_PAIR_COLUMNS = {"pair_delivery_id": "bigint", "pair_channel": "text", "pair_provider": "text"}


def _carried_sql(prefix: str = "", written: str | None = None, *, paired: bool = False) -> str:
    """The INSERT of carried events (one array parameter per column, each named with
    `prefix`); with `written`, only those of the deliveries that CTE returns; `paired`:
    with the columns of an `accepted` row's second delivery."""
    columns = {**_COLUMNS, **_PAIR_COLUMNS} if paired else _COLUMNS
    arrays = ", ".join(f"%({prefix}{name})s::{kind}[]" for name, kind in columns.items())
    only = f" WHERE v.delivery_id IN (SELECT id FROM {written})" if written else ""
    inserted = [*EVENT_INSERT_COLUMNS, *(_PAIR_COLUMNS if paired else ())]
    # Each inserted column from its array, but the time: the statement's one `now`.
    selected = [f"%({prefix}now)s" if name == "occurred_at" else f"v.{name}" for name in inserted]
    return planned_once(
        f"""
    INSERT INTO {AnalyticsEvent._meta.db_table} ({", ".join(inserted)})
    SELECT {", ".join(selected)}
      FROM unnest({arrays}) AS v({", ".join(columns)}){only}
"""
    )


# The carried events, as they are: one INSERT of arrays, no table read, nothing to plan
# beyond the insert itself (the route and every sender round take this one).
_CARRIED_SQL = _carried_sql()
_CARRIED_PAIRED_SQL = _carried_sql(paired=True)  # a route's: with its `accepted` pairs
_RIDING_PREFIX = "analytics_"  # the riding INSERT's parameters, apart from the round's


@cache
def riding_sql(written: str) -> str:
    """The INSERT of a round's carried events as a CTE of the round's own statement
    (`analytics_events_ride`), for the deliveries its CTE `written` returns."""
    return _carried_sql(_RIDING_PREFIX, written)


# Kinds whose event names the delivery's reason (the others name none).
_REASONED = frozenset({EventKind.SUPPRESSED.value, EventKind.FAILED.value})


def campaign_of(event_id: str) -> int | None:
    """The campaign a notification's event id names (`campaign:<id>:…`), else None."""
    if not event_id.startswith("campaign:"):
        return None
    named = event_id.split(":", 2)[1]
    return int(named) if named.isdigit() else None


def analytics_events_ride(changes: RoundChanges, *, written: str) -> tuple[str, dict] | None:
    """The events of a round's delivery changes as a CTE of the round's own statement
    (a rider of `deliveries.changes`, registered by `analytics.wiring`): only for the
    deliveries the round's CTE `written` returns, so a change the round did not write
    counts nothing. None when analytics is off, the round has no event, or it does not
    carry what its events name (then its announcement writes them, reading them back)."""
    if not settings.NOTIFY_ANALYTICS_ENABLED:
        return None
    rows = _event_rows(changes)
    if not rows or not _carried(changes, rows):
        return None
    return riding_sql(written), _carried_params(changes, rows, prefix=_RIDING_PREFIX)


def _carried_write(changes: RoundChanges, rows: Sequence[tuple]) -> int:
    """Write the round's events from what it carried, in one statement; how many."""
    params = _carried_params(changes, rows)
    if params is None:
        return 0
    sql = _CARRIED_PAIRED_SQL if "pair_delivery_id" in params else _CARRIED_SQL
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _carried_params(
    changes: RoundChanges, rows: Sequence[tuple], *, prefix: str = ""
) -> dict[str, object] | None:
    """The carried events' parameters (named with `prefix`); None when there is none.
    A round that created deliveries (the route) writes their `accepted` events in pairs
    (`_accepted_paired`), with the pair columns; a round that created none binds only
    the base columns, as the riding INSERT takes them."""
    now = timezone.now()
    subjects = changes.subjects
    channel_providers = settings.NOTIFY_CHANNEL_PROVIDERS
    people: dict[str, str] = {}
    paired = changes.created is not None
    events = _accepted_paired(changes.created or (), subjects) + [
        (pk, month, kind, provider, None) for pk, month, kind, provider in rows
    ]
    values: list[tuple] = []
    for pk, month, kind, provider, second in events:
        subject = subjects[pk]
        person = people.get(subject.user_id)
        if person is None:
            person = people[subject.user_id] = person_hash(subject.user_id)
        latency = None
        if kind == EventKind.DELIVERED:
            latency = round((now - month).total_seconds() * 1000)
        value = (
            str(kind),
            subject.reason if kind in _REASONED else "",
            latency,
            subject.producer_id,
            campaign_of(subject.event_id),
            subject.category,
            subject.channel,
            provider or channel_providers.get(subject.channel, ""),
            pk,
            subject.notification_id,
            person,
        )  # fmt: skip
        if paired:
            channel = subjects[second].channel if second is not None else ""
            value += (second, channel, channel_providers.get(channel, "") if channel else "")
        values.append(value)
    if not values:
        return None
    columns = [*_COLUMNS, *_PAIR_COLUMNS] if paired else list(_COLUMNS)
    params: dict[str, object] = {f"{prefix}now": now}
    for name, column in zip(columns, zip(*values, strict=True), strict=True):
        params[prefix + name] = array_literal(list(column))
    return params


def _accepted_paired(
    created: Iterable[tuple[int, datetime]], subjects: Mapping[int, Subject]
) -> list[tuple[int, datetime, str, str, int | None]]:
    """The `accepted` rows of the deliveries a route created, as (delivery id,
    accepted_at, kind, provider, the second delivery or None): a notification's
    deliveries two to a row, so a notification on two channels (in-app and email, as a
    campaign's are) queues one row, not two. Both are of one notification, so they share
    every column but the delivery, its channel and its provider; the shipper writes the
    row's two events into the store (analytics/store/shipper.py)."""
    waiting: dict[object, tuple[int, datetime]] = {}  # notification -> its unpaired delivery
    rows: list[tuple[int, datetime, str, str, int | None]] = []
    accepted = EventKind.ACCEPTED.value
    for pk, month in created:
        notification = subjects[pk].notification_id
        first = waiting.pop(notification, None)
        if first is None:
            waiting[notification] = (pk, month)
        else:
            rows.append((first[0], first[1], accepted, "", pk))
    rows += [(pk, month, accepted, "", None) for pk, month in waiting.values()]
    return rows
