"""The log lines of delivery outcomes, wherever the outcome is decided (the sender, or
routing for the in-app feed): one structured line per outcome, except for the delivered
members of a batch, which a round names in one line (each still has its own line at
DEBUG)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from deliveries.models import Delivery, DeliveryStatus

# One logger name for every outcome line, whichever module records it.
logger = logging.getLogger("deliveries.outcome")


def delivery_outcome_log(
    delivery: Delivery, *, status: str, reason: str, duration: int, level: int = logging.INFO
) -> None:
    """`key=value` text for a plain log search, and the same fields as attributes for a
    JSON formatter or a log shipper to index."""
    if not logger.isEnabledFor(level):
        return
    logger.log(
        level,
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


def delivery_outcomes_log(outcomes: Sequence[tuple[Delivery, str, str, int]]) -> None:
    """A round's outcome lines, (delivery, status, reason, duration) each. Every outcome
    but a plain delivery, and any outcome of a round of one, is a line of its own as
    above. The delivered members of a larger round are one line per channel naming
    their delivery ids (a search for an id still finds it), each with its own line at
    DEBUG: a campaign's rounds are hundreds of them, and a line each was a few percent
    of a sender's CPU."""
    if len(outcomes) == 1:
        delivery, status, reason, duration = outcomes[0]
        delivery_outcome_log(delivery, status=status, reason=reason, duration=duration)
        return
    delivered: dict[str, list[Delivery]] = {}
    for delivery, status, reason, duration in outcomes:
        plain = status == DeliveryStatus.DELIVERED and not reason
        if plain:
            delivered.setdefault(delivery.channel, []).append(delivery)
        delivery_outcome_log(
            delivery, status=status, reason=reason, duration=duration,
            level=logging.DEBUG if plain else logging.INFO,
        )  # fmt: skip
    if not logger.isEnabledFor(logging.INFO):
        return
    for channel, deliveries in delivered.items():
        ids = [delivery.pk for delivery in deliveries]
        logger.info(
            "delivery outcomes channel=%s status=delivered count=%s deliveries=%s",
            channel,
            len(ids),
            ",".join(map(str, ids)),
            extra={
                "event": "delivery_outcomes",
                "channel": channel,
                "status": str(DeliveryStatus.DELIVERED),
                "delivery_ids": ids,
            },
        )
