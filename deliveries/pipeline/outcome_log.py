"""One structured log line per delivery outcome, wherever the outcome is decided (the
sender, or routing for the in-app feed)."""

from __future__ import annotations

import logging

from deliveries.models import Delivery

# One logger name for every outcome line, whichever module records it.
logger = logging.getLogger("deliveries.outcome")


def delivery_outcome_log(delivery: Delivery, *, status: str, reason: str, duration: int) -> None:
    """`key=value` text for a plain log search, and the same fields as attributes for a
    JSON formatter or a log shipper to index."""
    logger.info(
        "delivery outcome notification=%s delivery=%s channel=%s status=%s reason=%s "
        "attempt=%s duration_ms=%s",
        delivery.notification_id,
        delivery.pk,
        delivery.channel,
        status,
        reason,
        delivery.attempts,
        duration,
        extra={
            "event": "delivery_outcome",
            "notification_id": str(delivery.notification_id),
            "delivery_id": delivery.pk,
            "channel": delivery.channel,
            "status": str(status),
            "reason": str(reason),
            "attempt": delivery.attempts,
            "duration_ms": duration,
        },
    )
