"""The sweepers: recover claims of lost senders and resend overdue deliveries whose
message was lost, and route again notifications whose route message was lost. The
delivery row and the notification's `routed_at` are the write-ahead record; this makes
it so."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from deliveries.channels.base import SendResult
from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus
from deliveries.pipeline.claim import deliveries_load
from deliveries.pipeline.enqueue import ROUTE_TASK, delivery_enqueue
from deliveries.pipeline.outcome import Tried, attempts_record
from deliveries.pipeline.sent_marks import sent_marks_read
from notify.broker import publish_task
from notify.models import Outbox

logger = logging.getLogger(__name__)


def sweep_due_deliveries(*, now: datetime | None = None) -> int:
    """Recover stale claims and republish overdue deliveries whose message was lost.

    Returns how many send messages were published.
    """
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.NOTIFY_SEND_CLAIM_TIMEOUT)
    stale_claims_settle_sent(stale_before=stale_before)
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


def stale_claims_settle_sent(*, stale_before: datetime) -> int:
    """Stale claims whose message a provider took (a batch's worker died before its
    round was recorded, see deliveries/pipeline/sent_marks.py) end delivered, not sent again.
    Returns how many were settled."""
    stale = list(
        Delivery.objects.filter(
            status=DeliveryStatus.SENDING, claimed_at__lt=stale_before
        ).values_list("pk", "claimed_at")[: settings.NOTIFY_RETRY_SWEEP_BATCH]
    )
    sent = sent_marks_read(claims=stale)
    if not sent:
        return 0
    claimed = dict(stale)
    loaded = deliveries_load(delivery_ids=list(sent))
    tries = [
        Tried(
            item.delivery,
            SendResult.delivered(provider_message_id=sent[pk], response="settled by the sweeper"),
            "",
            claimed_at=claimed[pk],
            started_at=claimed[pk],
            duration=0,
        )
        for pk, item in loaded.items()
    ]
    attempts_record(tries)
    logger.warning("settled %s deliveries sent before their sender was lost", len(tries))
    return len(tries)


def sweep_unrouted_notifications(*, now: datetime | None = None) -> int:
    """Publish the route task again for notifications still unrouted long after it was
    published (the message was lost, or dead-lettered after its retries).

    Each is published again at most every NOTIFY_ROUTE_SWEEP_AFTER and up to
    NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES publishes in all; routing twice is a no-op, so a
    late original message does no harm. Returns how many were published.
    """
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.NOTIFY_ROUTE_SWEEP_AFTER)
    oldest = now - timedelta(seconds=settings.NOTIFY_ROUTE_SWEEP_WINDOW)
    with transaction.atomic():
        rows = list(
            Outbox.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                notification__routed_at__isnull=True,
                notification__created_at__range=(oldest, stale),
                published_at__lte=stale,
                publish_attempts__lt=settings.NOTIFY_ROUTE_SWEEP_MAX_PUBLISHES,
            )
            .order_by("published_at")
            .values_list("pk", "notification_id", "queue")[: settings.NOTIFY_ROUTE_SWEEP_BATCH]
        )
        for _, notification_id, queue in rows:
            publish_task(ROUTE_TASK, args=[str(notification_id)], queue=queue,
                         priority=settings.NOTIFY_PRIORITY_RETRY)  # fmt: skip
        Outbox.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(
            published_at=now, publish_attempts=F("publish_attempts") + 1
        )
    if rows:
        logger.warning("republished the route of %s notifications left unrouted", len(rows))
    return len(rows)
