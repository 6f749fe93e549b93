"""Re-driving deliveries that could not be delivered, after whatever broke was fixed."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from deliveries.models import DeadLetter, Delivery, DeliveryRedrive, DeliveryStatus
from deliveries.pipeline.delivery_rows import delivery_ttl_seconds
from deliveries.pipeline.enqueue import SEND_TASK, delivery_enqueue

# Expired pushes are not re-driven: their usefulness (TTL) is over by definition.
REDRIVABLE = (DeliveryStatus.DEAD, DeliveryStatus.FAILED)


def deliveries_redrive(*, delivery_ids: Iterable[int], by) -> int:
    """Queue dead or failed deliveries again with a fresh attempt budget; returns how many.

    Each re-drive is recorded with who did it and the state it left, and the dead
    letters of their send messages are closed (the fresh send replaces them). The send
    messages are published after commit; the claim makes a double click harmless.
    """
    now = timezone.now()
    with transaction.atomic():
        rows = list(
            Delivery.objects.select_for_update(of=("self",))
            .select_related("notification__category")
            .filter(pk__in=list(delivery_ids), status__in=REDRIVABLE)
        )
        DeliveryRedrive.objects.bulk_create(
            DeliveryRedrive(
                delivery_id=row.pk,
                by=by,
                previous_status=row.status,
                previous_reason=row.reason,
                previous_attempts=row.attempts,
            )
            for row in rows
        )
        Delivery.objects.filter(pk__in=[row.pk for row in rows]).update(
            status=DeliveryStatus.QUEUED,
            reason="",
            next_attempt_at=now,
            finished_at=None,
            claimed_at=None,
            enqueued_at=None,
            attempt_budget_from=F("attempts"),
            claim_recoveries=0,
            updated_at=now,
        )
        # Every channel gets a fresh deadline, counted from the re-drive by the same rule
        # as at routing: the old one has usually passed, and the delivery would expire unsent.
        for row in rows:
            row.deadline = now + timedelta(
                seconds=delivery_ttl_seconds(row.notification, row.channel)
            )
        Delivery.objects.bulk_update(rows, ["deadline"])
        send_letters_close(delivery_ids=[row.pk for row in rows], by=by, now=now)
        for row in rows:
            transaction.on_commit(
                lambda row=row: delivery_enqueue(
                    delivery_id=row.pk, channel=row.channel, queue=row.queue, retry=True
                )
            )
    return len(rows)


def send_letters_close(*, delivery_ids: list[int], by, now) -> int:
    """Mark the open dead letters of these deliveries' send messages re-driven; returns
    how many. (A send message carries its delivery id as its one argument.)"""
    if not delivery_ids:
        return 0
    return DeadLetter.objects.filter(
        task=SEND_TASK, redriven_at__isnull=True, arguments__args__0__in=delivery_ids
    ).update(redriven_at=now, redriven_by=by)
