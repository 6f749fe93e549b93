"""Status webhook events: written where an outcome is written, posted from `low`.

A round that ends deliveries (the outcome step, routing, the quiet-hours release, an
SMS receipt, provider news) announces its changes (deliveries/changes.py); this module,
listening, writes their events for every subscribed endpoint in ONE INSERT…SELECT, in
the round's transaction, and publishes their post messages after commit. Whether
anyone subscribes to an event type at all is kept in each process for
NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS, so a round nobody listens to runs no
statement. The payload follows the Standard Webhooks shape: `{type, timestamp, data}`;
`data.sequence` orders the events about one delivery (numbered in the same statement).

Posting, signing, retries and disabling are beside it in webhooks/.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from deliveries.changes import RoundChanges
from deliveries.models import Delivery, DeliveryStatus, ProviderEventKind
from notify.broker import chunked, publish_task
from notify.models import Category, Notification, Recipient
from pgarrays import array_literal, planned_once
from webhooks.models import (
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventStatus,
    WebhookEventType,
    WebhookSubscription,
)

logger = logging.getLogger(__name__)

# The posting task (webhooks/tasks.py; its name is from when it lived in deliveries),
# named here so every writer can publish it.
WEBHOOK_POST_TASK = "deliveries.webhooks_post"

# A delivery's status → the event it produces (other statuses produce none).
EVENT_BY_STATUS: dict[str, str] = {
    DeliveryStatus.DELIVERED: WebhookEventType.DELIVERY_DELIVERED,
    DeliveryStatus.REACHED: WebhookEventType.DELIVERY_REACHED,
    DeliveryStatus.FAILED: WebhookEventType.DELIVERY_FAILED,
    DeliveryStatus.DEAD: WebhookEventType.DELIVERY_FAILED,
    DeliveryStatus.EXPIRED: WebhookEventType.DELIVERY_FAILED,
    DeliveryStatus.SUPPRESSED: WebhookEventType.DELIVERY_SUPPRESSED,
}
# Provider news that changes no status → its event.
EVENT_BY_NEWS: dict[str, str] = {
    ProviderEventKind.COMPLAINED: WebhookEventType.DELIVERY_COMPLAINED,
    ProviderEventKind.OPENED: WebhookEventType.DELIVERY_OPENED,
    ProviderEventKind.CLICKED: WebhookEventType.DELIVERY_CLICKED,
}

_cache: dict[str, object] = {"types": frozenset(), "at": float("-inf")}


def subscribed_event_types() -> frozenset[str]:
    """The event types some endpoint subscribes to (cached in this process)."""
    now = time.monotonic()
    if now - _cache["at"] >= settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS:
        # Disabled endpoints too: their events are written, and wait for them.
        _cache["types"] = frozenset(
            WebhookSubscription.objects.values_list("event_type", flat=True).distinct()
        )
        _cache["at"] = now
    return _cache["types"]  # type: ignore[return-value]


def subscription_cache_clear() -> None:
    """Forget the cached subscriptions (this process only): after a change made here."""
    _cache["at"] = float("-inf")


def _timestamp_sql(value: str = "%(now)s") -> str:
    """ISO 8601 in UTC, as text, of a timestamptz expression (NULL stays NULL)."""
    return f"to_char({value} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"


def _common_data_sql() -> str:
    return (
        "'notification_id', n.id, 'event_id', n.event_id, 'user_id', r.user_id, 'category', c.key"
    )


# Delivery events, then notification.routed events; each row joined to the producer's
# subscriptions of its type, on enabled and disabled endpoints alike (a disabled one's
# events wait for it, bounded: webhooks/backlog.py). One statement for the
# whole round. Each delivery event takes the next of its delivery's sequence numbers,
# raised in the same statement (`bumped`): the UPDATE locks the delivery's row, so two
# rounds writing about one delivery number their events in the order they commit. One
# happening is one number, shared by the copies for several endpoints; a routed event
# is 0, before all of its deliveries' events.
_EVENTS_SQL = planned_once(
    f"""
    WITH v AS (
        SELECT * FROM unnest(%(d_id)s::bigint[], %(d_month)s::timestamptz[], %(d_type)s::text[],
                             %(d_reported)s::boolean[], %(d_reported_at)s::timestamptz[])
               WITH ORDINALITY AS v(id, month, event_type, reported, reported_at, ord)
    ), wanted AS (
        SELECT v.*, d.channel, d.status, d.reason, d.attempts, n.id AS notification_id,
               n.event_id, n.recipient_id, n.producer_id, r.user_id, c.key AS category,
               row_number() OVER (PARTITION BY v.id ORDER BY v.ord) AS k,
               count(*) OVER (PARTITION BY v.id) AS how_many
          FROM v
          JOIN {Delivery._meta.db_table} d ON d.id = v.id AND d.accepted_at = v.month
          JOIN {Notification._meta.db_table} n ON n.id = d.notification_id
                                              AND n.created_at = d.accepted_at
          JOIN {Recipient._meta.db_table} r ON r.id = n.recipient_id
          JOIN {Category._meta.db_table} c ON c.id = n.category_id
         WHERE EXISTS (SELECT 1 FROM {WebhookSubscription._meta.db_table} s
                        WHERE s.producer_id = n.producer_id AND s.event_type = v.event_type)
    ), bumped AS (
        UPDATE {Delivery._meta.db_table} d
           SET webhook_sequence = d.webhook_sequence + w.how_many
          FROM (SELECT DISTINCT id, month, how_many FROM wanted) w
         WHERE d.id = w.id AND d.accepted_at = w.month
        RETURNING d.id, d.webhook_sequence - w.how_many AS seq_from
    ), written AS (
        INSERT INTO {WebhookEvent._meta.db_table}
            (endpoint_id, msg_id, event_type, payload, recipient_id, status, attempts,
             attempts_before_redrive, next_attempt_at, enqueued_at, created_at, last_error,
             sequence, notification_id)
        SELECT s.endpoint_id, 'msg_' || replace(gen_random_uuid()::text, '-', ''),
               s.event_type,
               jsonb_build_object('type', s.event_type, 'timestamp', {_timestamp_sql()},
                   'data', jsonb_build_object(
                       'notification_id', w.notification_id, 'event_id', w.event_id,
                       'user_id', w.user_id, 'category', w.category,
                       'delivery_id', w.id, 'channel', w.channel, 'status', w.status,
                       'reason', w.reason, 'attempts', w.attempts,
                       'sequence', b.seq_from + w.k)
                     || CASE WHEN w.reported THEN jsonb_build_object(
                            'provider_occurred_at', {_timestamp_sql("w.reported_at")})
                        ELSE '{{}}'::jsonb END),
               w.recipient_id, '{WebhookEventStatus.PENDING.value}', 0, 0, %(now)s, %(now)s,
               %(now)s, '', b.seq_from + w.k, w.notification_id
          FROM wanted w
          JOIN bumped b ON b.id = w.id
          JOIN {WebhookSubscription._meta.db_table} s ON s.producer_id = w.producer_id
                                                    AND s.event_type = w.event_type
        UNION ALL
        SELECT s.endpoint_id, 'msg_' || replace(gen_random_uuid()::text, '-', ''),
               s.event_type,
               jsonb_build_object('type', s.event_type, 'timestamp', {_timestamp_sql()},
                   'data', jsonb_build_object({_common_data_sql()},
                       'sequence', 0,
                       'deliveries', COALESCE((
                           SELECT jsonb_agg(jsonb_build_object('delivery_id', d.id,
                                    'channel', d.channel, 'status', d.status,
                                    'reason', d.reason) ORDER BY d.id)
                             FROM {Delivery._meta.db_table} d
                            WHERE d.notification_id = n.id AND d.accepted_at = n.created_at),
                           '[]'::jsonb))),
               n.recipient_id, '{WebhookEventStatus.PENDING.value}', 0, 0, %(now)s, %(now)s,
               %(now)s, '', 0, n.id
          FROM unnest(%(n_id)s::uuid[], %(n_month)s::timestamptz[]) AS v(id, month)
          JOIN {Notification._meta.db_table} n ON n.id = v.id AND n.created_at = v.month
          JOIN {Recipient._meta.db_table} r ON r.id = n.recipient_id
          JOIN {Category._meta.db_table} c ON c.id = n.category_id
          JOIN {WebhookSubscription._meta.db_table} s
            ON s.producer_id = n.producer_id
           AND s.event_type = '{WebhookEventType.NOTIFICATION_ROUTED.value}'
        RETURNING id, endpoint_id, notification_id
    )
    SELECT w.id, w.endpoint_id, w.notification_id
      FROM written w
      JOIN {WebhookEndpoint._meta.db_table} e ON e.id = w.endpoint_id AND e.active
"""
)


def changes_heard(changes: RoundChanges) -> int:
    """The listener of the pipeline's announcements (deliveries/changes.py): provider
    news by kind becomes its event type, then `webhook_events_write`."""
    news = [(pk, month, EVENT_BY_NEWS[k]) for pk, month, k in changes.news if k in EVENT_BY_NEWS]
    return webhook_events_write(
        deliveries=changes.deliveries,
        notifications=changes.notifications,
        news=news,
        reported=changes.reported,
        reported_at=changes.reported_at,
    )


def webhook_events_write(
    *,
    deliveries: Iterable[tuple[int, datetime, str]] = (),
    notifications: Iterable[tuple[object, datetime]] = (),
    news: Iterable[tuple[int, datetime, str]] = (),
    reported: bool = False,
    reported_at: datetime | None = None,
) -> int:
    """Write the events of a round and publish their posts after commit; how many are
    posted (a disabled endpoint's are written too, and wait for it).

    `deliveries`: (id, accepted_at, status written) of deliveries whose outcome this
    round wrote; `notifications`: (id, created_at) of notifications this round routed;
    `news`: (id, accepted_at, event type) of provider news about a delivery that changes
    no status (a spam complaint, an open, a click). Call inside the round's transaction.
    Nothing runs when nobody subscribes to any event the round could produce.

    `reported`: the provider told us what these delivery events say (its webhook, an
    SMS receipt); their `data` then has `provider_occurred_at`, when the provider says
    it happened (`reported_at`, None when it gave no time). Provider news comes one
    event at a time, so the time is the call's, not a row's.
    """
    subscribed = subscribed_event_types()
    if not subscribed:
        return 0
    rows = [
        (pk, month, EVENT_BY_STATUS[status])
        for pk, month, status in deliveries
        if status in EVENT_BY_STATUS and EVENT_BY_STATUS[status] in subscribed
    ]
    rows += [(pk, month, kind) for pk, month, kind in news if kind in subscribed]
    routed = list(notifications) if WebhookEventType.NOTIFICATION_ROUTED in subscribed else []
    if not rows and not routed:
        return 0
    params = {
        "d_id": array_literal([r[0] for r in rows]),
        "d_month": array_literal([r[1] for r in rows]),
        "d_type": array_literal([str(r[2]) for r in rows]),
        # An outcome round passes these empty: unnest pads them with NULLs (not reported).
        "d_reported": array_literal([True] * len(rows) if reported else []),
        "d_reported_at": array_literal([reported_at] * len(rows) if reported else []),
        "n_id": array_literal([str(n[0]) for n in routed]),
        "n_month": array_literal([n[1] for n in routed]),
        "now": timezone.now(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_EVENTS_SQL, params)
        postable = cursor.fetchall()  # those of enabled endpoints: a disabled one's wait
    if postable:
        by_endpoint, groups = events_by_endpoint(postable)
        transaction.on_commit(lambda: webhook_posts_publish(by_endpoint=by_endpoint, groups=groups))
    return len(postable)


def events_by_endpoint(
    rows: Iterable[tuple[int, int, object]],
) -> tuple[dict[int, list[int]], dict[int, object]]:
    """(event id, endpoint id, notification id) rows as `webhook_posts_publish` takes them."""
    by_endpoint: dict[int, list[int]] = {}
    groups: dict[int, object] = {}
    for event_id, endpoint_id, notification_id in rows:
        by_endpoint.setdefault(endpoint_id, []).append(event_id)
        groups[event_id] = notification_id
    return by_endpoint, groups


def post_batches(ids: Iterable[int], *, groups: Mapping[int, object], size: int) -> list[list[int]]:
    """Event ids cut into messages of about `size`, never splitting a group (one
    notification's events): a message posts its events one after another, so events of
    one delivery that travel together arrive in their order, whatever runs beside them.
    Groups come in the order of their first event, each in id order (= sequence order)."""
    by_group: dict[object, list[int]] = {}
    for event_id in sorted(ids):
        group = groups.get(event_id)
        by_group.setdefault(event_id if group is None else group, []).append(event_id)
    batches: list[list[int]] = []
    current: list[int] = []
    for members in by_group.values():
        if current and len(current) + len(members) > size:
            batches.append(current)
            current = []
        current = current + members
    if current:
        batches.append(current)
    return batches


def webhook_posts_publish(
    *,
    by_endpoint: Mapping[int, Sequence[int]],
    groups: Mapping[int, object] | None = None,
    countdown: float | None = None,
) -> None:
    """Publish post messages on `low`: one endpoint's events, in batches, per message;
    `groups` (event id → its notification id) keeps each notification's events in one
    message (see `post_batches`).

    A failed publish is logged: the events keep their `enqueued_at`, and the sweep
    re-queues them after NOTIFY_WEBHOOK_SWEEP_GRACE.
    """
    for ids in by_endpoint.values():
        batches = (
            post_batches(ids, groups=groups, size=settings.NOTIFY_WEBHOOK_POST_BATCH)
            if groups
            else chunked(sorted(ids), settings.NOTIFY_WEBHOOK_POST_BATCH)
        )
        for batch in batches:
            try:
                publish_task(
                    WEBHOOK_POST_TASK,
                    args=[batch],
                    queue="low",
                    countdown=countdown,
                    priority=settings.NOTIFY_WEBHOOK_PRIORITY,
                )
            except Exception:  # the sweep sends them later; the round's outcome stands
                logger.exception("webhook events %s: publish failed", batch)
