"""Event keys: what makes a producer's event id accepted once."""

from __future__ import annotations

from django.db import models

from notify.models import Notification
from notify.producer_models import Producer


class EventKey(models.Model):
    """(producer, event id) → notification: what makes an event id accepted once.

    A table of its own, not partitioned: a unique index on the partitioned notifications
    would have to include the month. Its rows go with their notification's month
    (retention, erasure), so an event id can be used again only after that.
    """

    notification = models.OneToOneField(
        Notification,
        on_delete=models.CASCADE,
        primary_key=True,
        db_constraint=False,
        related_name="event_key",
    )
    # No index of its own: the unique (producer, event_id) leads with it.
    producer = models.ForeignKey(
        Producer, on_delete=models.PROTECT, db_constraint=False, db_index=False, related_name="+"
    )
    event_id = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["producer", "event_id"], name="uniq_producer_event")
        ]

    def __str__(self) -> str:
        return f"{self.producer_id}:{self.event_id}"
