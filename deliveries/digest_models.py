"""Digest windows: the events of one person, category and channel gathered until their
window closes into one delivery."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from notify.models import Channel


class DigestWindowState(models.TextChoices):
    OPEN = "open", "Open (collecting events)"
    SENT = "sent", "Closed: its digest was handed to the sender"
    DEFERRED = "deferred", "Closed: its digest waits for quiet hours to end"
    DROPPED = "dropped", "Closed: the gate declined it (its items say why)"


class DigestWindow(models.Model):
    """One recipient's open (or closed) digest on one channel of a category, per digest
    key: the first event opens it, events until `closes_at` join it (DigestItem), and its
    close turns them into one delivery — the last event's, the carrier — that the sender
    renders with the whole list. PostgreSQL is its only home (docs/digests.md)."""

    recipient = models.ForeignKey(
        "notify.Recipient", on_delete=models.CASCADE, related_name="digest_windows"
    )
    category = models.ForeignKey("notify.Category", on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    digest_key = models.CharField(max_length=200, blank=True)
    state = models.CharField(
        max_length=10, choices=DigestWindowState.choices, default=DigestWindowState.OPEN
    )
    opened_at = models.DateTimeField()
    closes_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    items_count = models.PositiveIntegerField(default=0)
    carrier_id = models.BigIntegerField(
        null=True, blank=True, help_text="The delivery that carries the digest (its last event's)."
    )
    carrier_accepted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # At most one open window per (recipient, category, channel, key): the route's
            # upsert finds it, or opens it.
            models.UniqueConstraint(
                fields=["recipient", "category", "channel", "digest_key"],
                name="uniq_digest_window_open",
                condition=Q(state="open"),
            )
        ]
        indexes = [
            models.Index(fields=["closes_at"], name="digest_window_due", condition=Q(state="open")),
            models.Index(fields=["carrier_id"], name="digest_window_carrier"),
        ]

    def __str__(self) -> str:
        return f"{self.channel} digest of {self.recipient_id} ({self.state}, {self.items_count})"


class DigestItem(models.Model):
    """One event's delivery in a digest window: which events went into which digest."""

    window = models.ForeignKey(DigestWindow, on_delete=models.CASCADE, related_name="items")
    delivery_id = models.BigIntegerField(unique=True)
    notification_id = models.UUIDField()
    accepted_at = models.DateTimeField(help_text="The delivery's month (its partition).")
    occurred_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["window", "occurred_at"], name="digest_item_order")]

    def __str__(self) -> str:
        return f"delivery {self.delivery_id} in digest window {self.window_id}"


# --- Status webhooks out ------------------------------------------------------------------
