"""Re-driving deliveries that could not be delivered, after whatever broke was fixed."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from deliveries.enqueue import delivery_enqueue
from deliveries.models import Delivery, DeliveryRedrive, DeliveryStatus
from notify.models import Channel

# Expired pushes are not re-driven: their usefulness (TTL) is over by definition.
REDRIVABLE = (DeliveryStatus.DEAD, DeliveryStatus.FAILED)


def deliveries_redrive(*, delivery_ids: Iterable[int], by) -> int:
    """Queue dead or failed deliveries again with a fresh attempt budget; returns how many.

    Each re-drive is recorded with who did it and the state it left. The send messages
    are published after commit; the claim makes a double click harmless.
    """
    now = timezone.now()
    with transaction.atomic():
        rows = list(
            Delivery.objects.select_for_update()
            .filter(pk__in=list(delivery_ids), status__in=REDRIVABLE)
            .values("pk", "status", "reason", "attempts", "channel", "queue")
        )
        DeliveryRedrive.objects.bulk_create(
            DeliveryRedrive(
                delivery_id=row["pk"],
                by=by,
                previous_status=row["status"],
                previous_reason=row["reason"],
                previous_attempts=row["attempts"],
            )
            for row in rows
        )
        ids = [row["pk"] for row in rows]
        Delivery.objects.filter(pk__in=ids).update(
            status=DeliveryStatus.QUEUED,
            reason="",
            next_attempt_at=now,
            finished_at=None,
            claimed_at=None,
            enqueued_at=None,
            attempt_budget_from=F("attempts"),
            updated_at=now,
        )
        Delivery.objects.filter(pk__in=ids, channel=Channel.EMAIL).update(
            deadline=now + timedelta(seconds=settings.NOTIFY_EMAIL_DEADLINE_SECONDS)
        )
        for row in rows:
            transaction.on_commit(
                lambda row=row: delivery_enqueue(
                    delivery_id=row["pk"], channel=row["channel"], queue=row["queue"], retry=True
                )
            )
    return len(rows)
