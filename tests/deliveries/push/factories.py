"""Push deliveries made as routing makes them, for the tests that drive the attempt
directly."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from deliveries.models import Delivery, Device
from notify.models import Category, Notification, Producer, Recipient
from preferences.gate import gate_seal


def queued_push(
    category: Category,
    recipient: Recipient,
    device: Device,
    *,
    payload: dict[str, Any],
    occurred_at: datetime,
    subject: str = "",
) -> Delivery:
    """A notification of the producer "shop" with one queued delivery to `device` on its
    own channel (Web Push or FCM), due now, living 600 s."""
    notification = Notification.objects.create(
        producer=Producer.objects.get_or_create(name="shop")[0],
        event_id=str(uuid.uuid4()),
        recipient=recipient,
        category=category,
        payload=payload,
        fingerprint="test",
        ttl_seconds=600,
        occurred_at=occurred_at,
        subject=subject,
        routed_at=timezone.now(),
    )
    now = timezone.now()
    target = str(device.pk)
    return Delivery.objects.create(
        notification=notification,
        channel=device.kind,
        target=target,
        queue=category.queue,
        next_attempt_at=now,
        deadline=now + timedelta(seconds=600),
        recipient_id=recipient.pk,
        occurred_at=occurred_at,
        gate_seal=gate_seal(notification_id=notification.pk, channel=device.kind, target=target),
    )
