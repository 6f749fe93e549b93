"""Status webhook events: written where an outcome is written, posted from `low`.

A round that ends deliveries (the outcome step, routing, the quiet-hours release, an
SMS receipt) writes its events for every subscribed endpoint in ONE INSERT…SELECT, in
the round's transaction, and publishes their post messages after commit. Whether
anyone subscribes to an event type at all is kept in each process for
NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS, so a round nobody listens to runs no
statement. The payload follows the Standard Webhooks shape: `{type, timestamp, data}`.

Posting, signing, retries and disabling are in deliveries/webhooks/.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from deliveries.models import (
    Delivery,
    DeliveryStatus,
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventStatus,
    WebhookEventType,
    WebhookSubscription,
)
from notify.broker import chunked, publish_task
from notify.models import Category, Notification, Recipient
from notify.pgarrays import array_literal

logger = logging.getLogger(__name__)

# The posting task (deliveries/tasks.py), named here so every writer can publish it.
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

_cache: dict[str, object] = {"types": frozenset(), "at": float("-inf")}


def subscribed_event_types() -> frozenset[str]:
    """The event types some active endpoint subscribes to (cached in this process)."""
    now = time.monotonic()
    if now - _cache["at"] >= settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS:
        _cache["types"] = frozenset(
            WebhookSubscription.objects.filter(endpoint__active=True)
            .values_list("event_type", flat=True)
            .distinct()
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
# subscriptions of its type on active endpoints. One statement for the whole round.
_EVENTS_SQL = f"""
    INSERT INTO {WebhookEvent._meta.db_table}
        (endpoint_id, msg_id, event_type, payload, recipient_id, status, attempts,
         next_attempt_at, enqueued_at, created_at, last_error)
    SELECT s.endpoint_id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.event_type,
           jsonb_build_object('type', s.event_type, 'timestamp', {_timestamp_sql()},
               'data', jsonb_build_object({_common_data_sql()},
                   'delivery_id', d.id, 'channel', d.channel, 'status', d.status,
                   'reason', d.reason, 'attempts', d.attempts)
                 || CASE WHEN v.reported THEN jsonb_build_object(
                        'provider_occurred_at', {_timestamp_sql("v.reported_at")})
                    ELSE '{{}}'::jsonb END),
           n.recipient_id, '{WebhookEventStatus.PENDING.value}', 0, %(now)s, %(now)s, %(now)s, ''
      FROM unnest(%(d_id)s::bigint[], %(d_month)s::timestamptz[], %(d_type)s::text[],
                  %(d_reported)s::boolean[], %(d_reported_at)s::timestamptz[])
           AS v(id, month, event_type, reported, reported_at)
      JOIN {Delivery._meta.db_table} d ON d.id = v.id AND d.accepted_at = v.month
      JOIN {Notification._meta.db_table} n ON n.id = d.notification_id
                                          AND n.created_at = d.accepted_at
      JOIN {Recipient._meta.db_table} r ON r.id = n.recipient_id
      JOIN {Category._meta.db_table} c ON c.id = n.category_id
      JOIN {WebhookSubscription._meta.db_table} s ON s.producer_id = n.producer_id
                                                AND s.event_type = v.event_type
      JOIN {WebhookEndpoint._meta.db_table} e ON e.id = s.endpoint_id AND e.active
    UNION ALL
    SELECT s.endpoint_id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.event_type,
           jsonb_build_object('type', s.event_type, 'timestamp', {_timestamp_sql()},
               'data', jsonb_build_object({_common_data_sql()},
                   'deliveries', COALESCE((
                       SELECT jsonb_agg(jsonb_build_object('delivery_id', d.id,
                                'channel', d.channel, 'status', d.status, 'reason', d.reason)
                                ORDER BY d.id)
                         FROM {Delivery._meta.db_table} d
                        WHERE d.notification_id = n.id AND d.accepted_at = n.created_at),
                       '[]'::jsonb))),
           n.recipient_id, '{WebhookEventStatus.PENDING.value}', 0, %(now)s, %(now)s, %(now)s, ''
      FROM unnest(%(n_id)s::uuid[], %(n_month)s::timestamptz[]) AS v(id, month)
      JOIN {Notification._meta.db_table} n ON n.id = v.id AND n.created_at = v.month
      JOIN {Recipient._meta.db_table} r ON r.id = n.recipient_id
      JOIN {Category._meta.db_table} c ON c.id = n.category_id
      JOIN {WebhookSubscription._meta.db_table} s
        ON s.producer_id = n.producer_id
       AND s.event_type = '{WebhookEventType.NOTIFICATION_ROUTED.value}'
      JOIN {WebhookEndpoint._meta.db_table} e ON e.id = s.endpoint_id AND e.active
    RETURNING id, endpoint_id
"""


def webhook_events_write(
    *,
    deliveries: Iterable[tuple[int, datetime, str]] = (),
    notifications: Iterable[tuple[object, datetime]] = (),
    news: Iterable[tuple[int, datetime, str]] = (),
    reported: bool = False,
    reported_at: datetime | None = None,
) -> int:
    """Write the events of a round and publish their posts after commit; how many.

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
        written = cursor.fetchall()
    if written:
        by_endpoint: dict[int, list[int]] = {}
        for event_id, endpoint_id in written:
            by_endpoint.setdefault(endpoint_id, []).append(event_id)
        transaction.on_commit(lambda: webhook_posts_publish(by_endpoint=by_endpoint))
    return len(written)


def webhook_posts_publish(*, by_endpoint: dict[int, list[int]], countdown: float | None = None):
    """Publish post messages on `low`: one endpoint's events, in batches, per message.

    A failed publish is logged: the events keep their `enqueued_at`, and the sweep
    re-queues them after NOTIFY_WEBHOOK_SWEEP_GRACE.
    """
    for ids in by_endpoint.values():
        for batch in chunked(sorted(ids), settings.NOTIFY_WEBHOOK_POST_BATCH):
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


def delivery_event_rows(rows: Sequence[Delivery]) -> list[tuple[int, datetime, str]]:
    """(id, accepted_at, status) of deliveries as written, for `webhook_events_write`."""
    return [(d.pk, d.accepted_at, d.status) for d in rows]
