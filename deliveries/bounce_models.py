"""Every mail the bounce domain received, matched to its delivery or not."""

from __future__ import annotations

from django.db import models


class BounceOutcome(models.TextChoices):
    APPLIED = "applied", "Applied to its delivery"
    REPLAY = "replay", "Already applied (the same report again)"
    IGNORED = "ignored", "Not a bounce or a complaint (kept, changed nothing)"
    UNMATCHED = "unmatched", "No delivery of ours (kept, changed nothing)"


class BounceMail(models.Model):
    """A mail that came back: what it was, which delivery it named, and what it did.
    The mail itself is kept (bounded) for inspection in admin."""

    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    envelope_to = models.CharField(max_length=320)
    envelope_from = models.CharField(max_length=320, blank=True)
    subject = models.CharField(max_length=255, blank=True)
    kind = models.CharField(max_length=16)  # reports.MailKind
    outcome = models.CharField(max_length=16, choices=BounceOutcome.choices)
    delivery_id = models.BigIntegerField(null=True, blank=True)
    message_id = models.CharField(max_length=255, blank=True)
    detail = models.CharField(max_length=500, blank=True)
    raw = models.BinaryField()  # the mail as received, at most NOTIFY_BOUNCE_MAX_BYTES

    class Meta:
        indexes = [models.Index(fields=["outcome", "-received_at"], name="bounce_mail_outcome")]

    def __str__(self) -> str:
        return f"{self.kind} to {self.envelope_to}: {self.outcome}"
