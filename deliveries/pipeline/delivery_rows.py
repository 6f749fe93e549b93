"""The row a delivery is created with: its target, queue, deadline (the notification's
channel TTL), the gate's seal and timing, as routing writes it."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from deliveries.models import DeliveryStatus, Reason
from deliveries.pipeline.digests import (
    category_timing_problem,
    digest_window_seconds,
    unread_delay_seconds,
)
from deliveries.pipeline.route_write import DeliveryRow
from deliveries.pipeline.suppression import suppression_key
from notify.deadlines import deadline_seconds
from notify.models import Notification
from preferences.gate import (
    ChannelDecision,
    gate_seal,
)

logger = logging.getLogger(__name__)


def delivery_row(
    notification: Notification, decision: ChannelDecision, now: datetime, *, gather: bool = True
) -> DeliveryRow:
    """The sealed delivery row for one gate decision (not written). `gather=False`: never
    into a digest or a delay (a fallback goes at once: the first channel already failed)."""
    channel, target = decision.channel, decision.target
    deadline = delivery_deadline(notification, channel)
    status, reason = decision.status, decision.reason
    if decision.allowed and deadline <= now:
        # Routed only after its deadline (a relay or worker was away): never sent late.
        status, reason = DeliveryStatus.EXPIRED, Reason.DEADLINE_PASSED
    elif (
        decision.allowed
        and notification.suppressed
        and suppression_key(channel=channel, address=target) in notification.suppressed
    ):
        status, reason = DeliveryStatus.SUPPRESSED, Reason.ADDRESS_SUPPRESSED
    live = status == DeliveryStatus.QUEUED
    later = decision.not_before
    if gather and status in (DeliveryStatus.QUEUED, DeliveryStatus.DEFERRED):
        problem = category_timing_problem(notification, channel, now)
        if problem is not None:
            logger.error("Delivery failed: its category's setting cannot be computed: %s", problem)
            status, reason = DeliveryStatus.FAILED, Reason.CATEGORY_SETTING_INVALID
            return row_values(notification, decision, status, reason, None, deadline, now, None)
        # Gathered into a digest (quiet hours are decided when the window closes), or
        # held until the in-app entry is read; neither is sent now.
        if digest_window_seconds(notification, channel) is not None:
            status = DeliveryStatus.DIGESTING
            return row_values(notification, decision, status, "", None, deadline, None, None)
        delay = unread_delay_seconds(notification, channel)
        if delay is not None and live:
            status, reason = DeliveryStatus.DEFERRED, Reason.DELAYED_IF_UNREAD
            due = now + timedelta(seconds=delay)
            return row_values(notification, decision, status, reason, due, deadline, None, None)
    return row_values(
        notification,
        decision,
        status,
        reason,
        later or (now if live else None),
        deadline,
        None if live or later else now,
        now if live else None,
    )


def row_values(
    notification: Notification,
    decision: ChannelDecision,
    status: str,
    reason: str,
    next_attempt_at: datetime | None,
    deadline: datetime,
    finished_at: datetime | None,
    enqueued_at: datetime | None,
) -> DeliveryRow:
    """A sealed delivery row (not written)."""
    channel = decision.channel
    return DeliveryRow(
        notification_id=notification.pk,
        channel=channel,
        target=decision.target,
        queue=notification.category.sending_queue,
        status=status,
        reason=reason,
        next_attempt_at=next_attempt_at,
        deadline=deadline,
        finished_at=finished_at,
        enqueued_at=enqueued_at,
        gate_seal=gate_seal(
            notification_id=notification.pk, channel=channel, target=decision.target
        ),
        recipient_id=notification.recipient_id,
        occurred_at=notification.occurred_at,
        accepted_at=notification.created_at,
    )


def delivery_deadline(notification: Notification, channel: str) -> datetime:
    """When a delivery stops being worth sending: the notification's TTL, else the
    shorter of its category's and the channel's default (notify/deadlines.py).

    Counted from when the notification was due: a scheduled one's `send_at`, else its
    creation (a scheduled login code must not be born expired).
    """
    due = max(notification.created_at, notification.send_at or notification.created_at)
    return due + timedelta(seconds=delivery_ttl_seconds(notification, channel))


def delivery_ttl_seconds(notification: Notification, channel: str) -> int:
    """How long a delivery on `channel` stays worth sending: the notification's TTL, else
    the shorter of its category's and the channel's default."""
    return deadline_seconds(
        channel=channel,
        notification_ttl=notification.ttl_seconds,
        category_ttl=notification.category.ttl_seconds,
    )
