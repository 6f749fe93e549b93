"""What guards a person's contact data between producers (models of the notify app, kept
in a module of their own; notify.models re-exports them): the record of every change of
an email or phone, and the grants that let a producer reach recipients it did not create
when recipients are owned (NOTIFY_RECIPIENTS_OWNED, docs/producers.md)."""

from __future__ import annotations

from django.db import models


class ContactField(models.TextChoices):
    EMAIL = "email", "Email"
    PHONE = "phone", "Phone"


class ContactChange(models.Model):
    """One change of a recipient's email or phone: who made it (producer and key, or a
    staff user in admin), when, and the old and new values as keyed hashes (the erasure
    hash), so support can confirm "was it changed to this address?" without the table
    holding addresses. Shown on support's recipient page; erased with the recipient."""

    recipient = models.ForeignKey(
        "notify.Recipient", on_delete=models.CASCADE, related_name="contact_changes"
    )
    field = models.CharField(max_length=10, choices=ContactField.choices)
    old_hash = models.CharField(max_length=64, blank=True, help_text="Empty: there was none.")
    new_hash = models.CharField(max_length=64, blank=True, help_text="Empty: removed.")
    producer = models.ForeignKey(
        "notify.Producer", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    key_prefix = models.CharField(max_length=16, blank=True, help_text="The API key's prefix.")
    changed_by = models.CharField(
        max_length=200, help_text="Who asked, in words (producer and key, or staff user)."
    )
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["recipient", "-changed_at"], name="contact_change_recent")]

    def __str__(self) -> str:
        return f"{self.field} changed by {self.changed_by} at {self.changed_at:%Y-%m-%d %H:%M}"


class RecipientGrant(models.Model):
    """Lets `producer` reach a recipient another producer created, while recipients are
    owned (NOTIFY_RECIPIENTS_OWNED). Made by staff in admin."""

    recipient = models.ForeignKey(
        "notify.Recipient", on_delete=models.CASCADE, related_name="grants"
    )
    producer = models.ForeignKey("notify.Producer", on_delete=models.CASCADE, related_name="+")
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["recipient", "producer"], name="uniq_recipient_grant")
        ]

    def __str__(self) -> str:
        return f"{self.producer_id} may reach {self.recipient_id}"
