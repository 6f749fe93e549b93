"""A disabled endpoint's backlog: its events are still written, and wait for it, bounded.

While an endpoint is disabled nothing is posted to it, but the events about its
producer's notifications are written as ever (webhooks/events.py), so that
re-enabling it delivers what happened meanwhile. The backlog is bounded: the sweep keeps
the newest NOTIFY_WEBHOOK_DISABLED_BACKLOG_MAX pending events of each disabled endpoint
and drops older ones first, and drops any older than history's retention
(NOTIFY_RETENTION_DAYS: the notifications they name are gone by then). Each drop is
counted per endpoint in Redis, where /metrics reads it
(`notify_webhook_backlog_dropped_total{endpoint}`).
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django_redis import get_redis_connection

from webhooks.models import WebhookEndpoint, WebhookEvent, WebhookEventStatus

logger = logging.getLogger(__name__)

# Redis hash: endpoint id → events dropped from its backlog while it was disabled.
BACKLOG_DROPS_KEY = "notify:metrics:webhook_backlog_drops"

# Per disabled endpoint, its pending events past the newest `keep` (an index-only walk of
# webhook_event_backlog), and those older than the retention; one statement for all.
_TRIM_SQL = f"""
    WITH gone AS (
        SELECT over.id
          FROM {WebhookEndpoint._meta.db_table} e
          CROSS JOIN LATERAL (
              SELECT ev.id FROM {WebhookEvent._meta.db_table} ev
               WHERE ev.endpoint_id = e.id AND ev.status = '{WebhookEventStatus.PENDING.value}'
               ORDER BY ev.id DESC OFFSET %(keep)s
          ) over
         WHERE NOT e.active
        UNION
        SELECT ev.id
          FROM {WebhookEndpoint._meta.db_table} e
          JOIN {WebhookEvent._meta.db_table} ev
            ON ev.endpoint_id = e.id AND ev.status = '{WebhookEventStatus.PENDING.value}'
         WHERE NOT e.active AND ev.created_at < %(too_old)s
    )
    DELETE FROM {WebhookEvent._meta.db_table} ev USING gone
     WHERE ev.id = gone.id AND ev.status = '{WebhookEventStatus.PENDING.value}'
    RETURNING ev.endpoint_id
"""


def disabled_backlogs_trim(*, now: datetime) -> dict[int, int]:
    """Drop what disabled endpoints' backlogs hold beyond their bounds (the oldest first,
    and anything older than history's retention), count the drops; {endpoint id: dropped}."""
    params = {
        "keep": settings.NOTIFY_WEBHOOK_DISABLED_BACKLOG_MAX,
        "too_old": now - timedelta(days=settings.NOTIFY_RETENTION_DAYS),
    }
    with connection.cursor() as cursor:
        cursor.execute(_TRIM_SQL, params)
        dropped = Counter(endpoint_id for (endpoint_id,) in cursor.fetchall())
    if dropped:
        backlog_drops_count(dict(dropped))
        logger.warning("webhook backlogs of disabled endpoints: dropped %s", dict(dropped))
    return dict(dropped)


def backlog_drops_count(dropped: dict[int, int]) -> None:
    """Add to the drop counters (a lost count must not undo the drop: it is logged)."""
    try:
        pipe = get_redis_connection("default").pipeline(transaction=False)
        for endpoint_id, count in dropped.items():
            pipe.hincrby(BACKLOG_DROPS_KEY, str(endpoint_id), count)
        pipe.execute()
    except Exception:
        logger.exception("webhook backlog drops %s: not counted", dropped)


def backlog_drops() -> dict[str, float]:
    """{endpoint id: events dropped from its backlog}, for /metrics."""
    counts = get_redis_connection("default").hgetall(BACKLOG_DROPS_KEY)
    return {_text(endpoint): float(count) for endpoint, count in counts.items()}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
