"""How much of a queue class is routed but not yet sent: what the outbox relay reads (by
NOTIFY_OUTBOX_BACKLOG_SOURCE, wired in config) to publish only about a window of the
class's sending at a time and keep the rest of a flood in the outbox, where producers
take turns (notify/fair_share.py, docs/pipeline.md)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from deliveries.pipeline.ratelimit import provider_for_channel, provider_limit

# Deliveries on their way to a provider: queued (in a send message, a worker's line, or
# held behind the person's earlier one), claimed, or retrying within the window (a
# postponed send: the rate limit or the order). One statement; the channels without a
# provider (in-app) are sent at route and never wait here.
_UNSENT_SQL = """
SELECT channel, count(*) FROM deliveries_delivery
WHERE queue = %s AND channel = ANY(%s)
  AND (status IN ('queued', 'sending') OR (status = 'retrying' AND next_attempt_at <= %s))
GROUP BY channel
"""


def class_unsent(queue: str) -> tuple[int, float | None, float]:
    """(deliveries of `queue` routed and not yet sent on a rate-limited channel, the
    rate per second that paces them: the slowest of their providers', or, with none
    waiting, the slowest of every enabled channel's, since what the relay publishes next
    may go there; None when no enabled channel is rate-limited; and that provider's
    burst, 0 with no rate)."""
    channels = [
        channel
        for channel in settings.NOTIFY_CHANNELS_ENABLED
        if provider_for_channel(channel) is not None
    ]
    soon = timezone.now() + timedelta(seconds=settings.NOTIFY_OUTBOX_FAIR_WINDOW)
    with connection.cursor() as cursor:
        cursor.execute(_UNSENT_SQL, [queue, channels, soon])
        counts = dict(cursor.fetchall())
    pacing = counts or channels
    if not pacing:
        return 0, None, 0.0
    rate, burst = min(provider_limit(provider_for_channel(channel)) for channel in pacing)
    return sum(counts.values()), rate, burst
