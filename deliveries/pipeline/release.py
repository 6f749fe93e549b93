"""Releasing deliveries that quiet hours deferred: once the window ends they pass the
gate again (preferences may have changed meanwhile) and go out, wait more, or end
suppressed with the reason."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from deliveries.changes import changes_announce
from deliveries.models import Delivery, DeliveryStatus, Reason
from deliveries.pipeline.digests import read_before_delay_end
from deliveries.pipeline.enqueue import delivery_enqueue
from deliveries.pipeline.routing import gate_decide
from deliveries.pipeline.suppression import suppressed_addresses_sql, suppression_key
from notify.models import Notification

logger = logging.getLogger(__name__)


def deferred_release(*, now: datetime | None = None) -> int:
    """Beat: deferred deliveries whose quiet window (or delay) ended pass the gate again.

    A delivery delayed until its in-app entry is read ends `skipped_read` when the
    entry was read (or shown on the live stream) by then (docs/digests.md); the others
    go on as below.

    Past its deadline → `expired` (never sent late); allowed but to an address on the
    hard-bounce list (it may have bounced while this one waited) → `suppressed`; allowed →
    `queued` and enqueued; declined → `suppressed` with the reason; still quiet →
    deferred to the new window end. Returns how many were enqueued.
    """
    now = now or timezone.now()
    enqueue: list[tuple[int, str, str]] = []
    with transaction.atomic():
        due = list(
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(status=DeliveryStatus.DEFERRED, next_attempt_at__lte=now)
            .order_by("next_attempt_at")[: settings.NOTIFY_DEFERRED_RELEASE_BATCH]
        )
        # A delay that waited for the in-app entry to be read: read → not sent at all.
        read = read_before_delay_end(due)
        by_notification: dict[object, list[Delivery]] = {}
        for delivery in due:
            if delivery.pk in read:
                delivery.status = DeliveryStatus.SKIPPED_READ
                delivery.reason = read[delivery.pk]
                delivery.next_attempt_at = None
                delivery.finished_at = now
                delivery.updated_at = now
                continue
            by_notification.setdefault(delivery.notification_id, []).append(delivery)
        notifications = (
            Notification.objects.select_related("recipient", "category")
            .annotate(suppressed=suppressed_addresses_sql())
            .in_bulk(list(by_notification))
        )
        for notification_id, deliveries in by_notification.items():
            notification = notifications[notification_id]
            channels = list(dict.fromkeys(d.channel for d in deliveries))
            verdicts = {
                (d.channel, d.target): d
                for d in gate_decide(notification, channels=channels, now=now)
            }
            bounced = frozenset(notification.suppressed or ())
            for delivery in deliveries:
                verdict = verdicts.get((delivery.channel, delivery.target))
                # It may have bounced hard (on another notification) while this one waited.
                listed = suppression_key(channel=delivery.channel, address=delivery.target)
                delivery.updated_at = now
                if delivery.deadline is not None and delivery.deadline <= now:
                    # The quiet window outlasted its TTL: too late to be useful, not sent.
                    delivery.status = DeliveryStatus.EXPIRED
                    delivery.reason = Reason.DEADLINE_PASSED
                    delivery.next_attempt_at = None
                    delivery.finished_at = now
                elif verdict is not None and verdict.allowed and listed in bounced:
                    delivery.status = DeliveryStatus.SUPPRESSED
                    delivery.reason = Reason.ADDRESS_SUPPRESSED
                    delivery.next_attempt_at = None
                    delivery.finished_at = now
                elif verdict is not None and verdict.allowed:
                    delivery.status = DeliveryStatus.QUEUED
                    delivery.reason = ""
                    delivery.next_attempt_at = now
                    enqueue.append((delivery.pk, delivery.channel, delivery.queue))
                elif verdict is not None and verdict.status == DeliveryStatus.DEFERRED:
                    delivery.next_attempt_at = verdict.not_before
                else:
                    delivery.status = DeliveryStatus.SUPPRESSED
                    delivery.reason = verdict.reason if verdict else Reason.NO_ADDRESS
                    delivery.next_attempt_at = None
                    delivery.finished_at = now
        Delivery.objects.bulk_update(
            due, ["status", "reason", "next_attempt_at", "finished_at", "updated_at"]
        )
        changes_announce(deliveries=[(d.pk, d.accepted_at, d.status) for d in due])
    for delivery_id, channel, queue in enqueue:
        delivery_enqueue(delivery_id=delivery_id, channel=channel, queue=queue)
    if due:
        logger.info("released %s deferred deliveries, %s enqueued", len(due), len(enqueue))
    return len(enqueue)
