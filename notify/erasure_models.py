"""The erasure ledger and the suppression list it keeps (models of the notify app; see
notify.erasure and docs/erasure.md)."""

from __future__ import annotations

from django.db import models


class ErasureVia(models.TextChoices):
    API = "api", "API (DELETE /v1/users/{user_id})"
    ADMIN = "admin", "Admin"
    COMMAND = "command", "Management command"


class Erasure(models.Model):
    """The ledger: one row per erasure request, who asked and when, and what was removed.

    It holds no personal data: the person is named by the keyed hash of their user id
    and by the internal recipient id their rows had. Restoring archived history must drop
    the rows of every recipient id listed here (docs/erasure.md).
    """

    user_hash = models.CharField(
        max_length=64, db_index=True, help_text="Keyed hash of the user id (erasure_hash)."
    )
    recipient_pk = models.BigIntegerField(
        null=True, blank=True, help_text="The recipient id the erased rows had; empty if none."
    )
    via = models.CharField(max_length=10, choices=ErasureVia.choices)
    requested_by = models.CharField(max_length=200)
    erased_at = models.DateTimeField(auto_now_add=True)
    removed = models.JSONField(default=dict, blank=True, help_text="Rows removed, per kind.")
    never_registered = models.BooleanField(
        default=False,
        help_text="Nobody was ever registered with this user id: nothing was erased, and "
        "the id was not put on the suppression list.",
    )

    class Meta:
        ordering = ["-erased_at"]

    def __str__(self) -> str:
        return f"erasure {self.user_hash[:12]}… by {self.requested_by} at {self.erased_at:%Y-%m-%d}"


class SuppressedKind(models.TextChoices):
    USER_ID = "user_id", "User id"
    EMAIL = "email", "Email address"
    PHONE = "phone", "Phone number"


class ErasureSuppression(models.Model):
    """An erased user id, email or phone, as a keyed hash: a recipient registered again
    with it is held (`Recipient.erasure_hold_since`) until fresh consent."""

    kind = models.CharField(max_length=10, choices=SuppressedKind.choices)
    key = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "key"], name="uniq_erasure_suppression")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key[:12]}…"
