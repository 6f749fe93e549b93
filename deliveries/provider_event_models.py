"""What providers reported about messages they accepted (email providers' webhook events,
returned mail for SMTP, SMSC delivery receipts): recorded once each, and those that came
before their send."""

from __future__ import annotations

from django.db import models


class ProviderEventKind(models.TextChoices):
    """What a provider reported about a message after accepting it."""

    DELIVERED = "delivered", "Delivered to the mailbox"
    BOUNCED = "bounced", "Bounced"
    COMPLAINED = "complained", "Marked as spam"
    UNSUBSCRIBED = "unsubscribed", "Unsubscribed at the provider"
    OPENED = "opened", "Opened"
    CLICKED = "clicked", "Clicked"
    DEFERRED = "deferred", "Delayed by the mailbox"
    FAILED = "failed", "Not delivered (an SMS receipt)"
    OTHER = "other", "Other"


class ProviderEvent(models.Model):
    """One event a provider posted about a message it accepted (delivered, a bounce, a
    spam complaint, an unsubscribe, an open, a click), matched to its delivery by the
    provider's message id. Recorded once: a replay of the same event (same provider and
    key) is recognised and changes nothing. Erasure deletes them with the person's
    deliveries."""

    esp = models.CharField(max_length=20, help_text="The provider, e.g. postmark.")
    key = models.CharField(
        max_length=128, help_text="The provider's event id, or a hash of the event as posted."
    )
    delivery = models.ForeignKey(
        "deliveries.Delivery",
        on_delete=models.CASCADE,
        db_constraint=False,
        db_index=False,  # `provider_event_delivery` leads with it
        related_name="provider_events",
    )
    kind = models.CharField(max_length=12, choices=ProviderEventKind.choices)
    hard = models.BooleanField(default=False, help_text="A bounce that is permanent.")
    message_id = models.CharField(max_length=255)
    occurred_at = models.DateTimeField(null=True, blank=True, help_text="When, per the provider.")
    received_at = models.DateTimeField(auto_now_add=True)
    detail = models.TextField(blank=True, help_text="The provider's description or MTA answer.")

    class Meta:
        ordering = ["received_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["esp", "key"], name="uniq_provider_event")]
        indexes = [models.Index(fields=["delivery", "kind"], name="provider_event_delivery")]

    def __str__(self) -> str:
        return f"{self.esp} {self.kind} for delivery {self.delivery_id}"


class EarlyProviderEvent(models.Model):
    """A provider event whose message id no delivery carried yet when it arrived.

    A sender records its outcomes (and the provider's message id) at the end of its
    round, so a fast provider event can overtake the record. It waits here and a beat
    sweep applies it once its delivery is recorded; after NOTIFY_PROVIDER_EVENT_WAIT it
    is given up as unmatched (`given_up_at` set, the provider's text dropped) and kept
    for NOTIFY_PROVIDER_EVENT_UNMATCHED_DAYS for inspection.
    """

    esp = models.CharField(max_length=20)
    key = models.CharField(max_length=128)
    kind = models.CharField(max_length=12, choices=ProviderEventKind.choices)
    hard = models.BooleanField(default=False)
    message_id = models.CharField(max_length=255)
    occurred_at = models.DateTimeField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    detail = models.TextField(blank=True)
    given_up_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was given up as unmatched (null: waiting)."
    )

    class Meta:
        ordering = ["received_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["esp", "key"], name="uniq_early_provider_event")
        ]
        indexes = [models.Index(fields=["given_up_at", "received_at"], name="early_event_due")]

    def __str__(self) -> str:
        return f"{self.esp} {self.kind} for message {self.message_id}"
