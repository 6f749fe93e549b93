"""The outbox: what intake accepted, waiting for the relay to publish it, and the metrics
rollup of intake."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from notify.models import QueueClass


class Outbox(models.Model):
    """Written with the notification; marked published once the route task is confirmed."""

    notification = models.OneToOneField(
        "notify.Notification", on_delete=models.CASCADE, db_constraint=False, related_name="outbox"
    )
    queue = models.CharField(max_length=10, choices=QueueClass.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the relay may publish it: at once, or a scheduled notification's send_at. The
    # row is the durable record of the schedule (no broker-side delay to lose).
    due_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    publish_attempts = models.PositiveIntegerField(default=0)
    # The notification's producer, copied at intake (same INSERT): the relay takes turns
    # across producers on a fair class by index alone, without reading the notifications.
    # Empty on rows written before it existed, which the relay treats as one producer.
    # No constraint: the notification's own foreign key (PROTECT) already keeps it valid.
    producer = models.ForeignKey(
        "notify.Producer",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        verbose_name_plural = "outbox"
        indexes = [
            # The relay reads each queue class's due rows in order.
            models.Index(
                fields=["queue", "due_at"],
                name="outbox_unpublished_class_due",
                condition=Q(published_at__isnull=True),
            ),
            # A fair class: the producers with waiting rows (a skip scan) and each one's
            # oldest due rows, one probe per producer however long the flood.
            models.Index(
                fields=["queue", "producer", "due_at", "id"],
                name="outbox_unpublished_producer",
                condition=Q(published_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        state = "published" if self.published_at else "unpublished"
        return f"outbox {self.notification_id} ({state})"


class AcceptedCount(models.Model):
    """The metrics rollup of intake: notifications accepted per category, all time.

    Written only by notify.counts, which folds in notifications not counted yet. Rows
    stay when notifications are erased or dropped by retention, so the counter never
    goes down.
    """

    category = models.OneToOneField(
        "notify.Category", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    count = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.category_id}: {self.count}"
