"""The sweeper: recover claims of lost senders and resend overdue deliveries whose
message was lost. The delivery row is the write-ahead record; this makes it so."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from deliveries.enqueue import delivery_enqueue
from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus

logger = logging.getLogger(__name__)


def sweep_due_deliveries(*, now: datetime | None = None) -> int:
    """Recover stale claims and republish overdue deliveries whose message was lost.

    Returns how many send messages were published.
    """
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.NOTIFY_SEND_CLAIM_TIMEOUT)
    recovered = Delivery.objects.filter(
        status=DeliveryStatus.SENDING, claimed_at__lt=stale_before
    ).update(
        status=DeliveryStatus.RETRYING,
        next_attempt_at=now,
        enqueued_at=None,
        last_error="claim expired: the worker was lost during the send",
        updated_at=now,
    )
    if recovered:
        logger.warning("recovered %s deliveries whose sender was lost", recovered)

    due_before = now - timedelta(seconds=settings.NOTIFY_RETRY_SWEEP_GRACE)
    resent_before = now - timedelta(seconds=settings.NOTIFY_RETRY_RESWEEP_AFTER)
    due = list(
        Delivery.objects.filter(status__in=CLAIMABLE_STATUSES, next_attempt_at__lte=due_before)
        .filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lte=resent_before))
        .order_by("next_attempt_at")
        .values_list("pk", "channel", "queue", "attempts")[: settings.NOTIFY_RETRY_SWEEP_BATCH]
    )
    for delivery_id, channel, queue, attempts in due:
        delivery_enqueue(delivery_id=delivery_id, channel=channel, queue=queue, retry=attempts > 0)
    return len(due)
