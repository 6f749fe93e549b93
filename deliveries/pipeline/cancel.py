"""A producer cancels a notification: what was not sent yet is not sent.

Deliveries still waiting (`queued`, `retrying`, `deferred`, `digesting`) become `cancelled` in one
UPDATE; a sender claims only `queued|retrying` rows, so none of them goes out after it.
A delivery already being sent (`sending`) or finished is left as it is. A notification
not routed yet is marked cancelled, and routing then creates no deliveries for it.
"""

from __future__ import annotations

from enum import Enum

from django.db import transaction
from django.utils import timezone

from deliveries.models import Delivery, DeliveryStatus
from notify.models import Notification, Producer

WAITING = (
    DeliveryStatus.QUEUED,
    DeliveryStatus.RETRYING,
    DeliveryStatus.DEFERRED,
    DeliveryStatus.DIGESTING,  # in an open digest window: the digest will not list it
)


class Cancelled(Enum):
    DONE = "done"  # nothing of it will be sent from now on
    NOTHING_LEFT = "nothing_left"  # every delivery was already sent, or is being sent
    NOT_FOUND = "not_found"


def notification_cancel(*, producer: Producer, notification_id: object) -> Cancelled:
    """Cancel what is not sent yet of one of the producer's notifications."""
    now = timezone.now()
    with transaction.atomic():
        notification = (
            Notification.objects.select_for_update()
            .filter(pk=notification_id, producer=producer)
            .only("pk", "routed_at", "cancelled_at")
            .first()
        )
        if notification is None:
            return Cancelled.NOT_FOUND
        if notification.routed_at is None:
            cancelled = 1  # routing will see cancelled_at and create nothing
        else:
            cancelled = Delivery.objects.filter(
                notification_id=notification.pk, status__in=WAITING
            ).update(
                status=DeliveryStatus.CANCELLED,
                reason="",
                next_attempt_at=None,
                finished_at=now,
                updated_at=now,
            )
        if cancelled and notification.cancelled_at is None:
            Notification.objects.filter(pk=notification.pk).update(cancelled_at=now)
    return Cancelled.DONE if cancelled else Cancelled.NOTHING_LEFT
