"""What retention did with each month of history: archived (where, how many rows, the
checksum it verified), failed (why), and whether support restored it for a while."""

from __future__ import annotations

from django.db import models


class MonthState(models.TextChoices):
    ARCHIVED = "archived", "Archived and dropped"
    FAILED = "failed", "Archive failed; the month stays in the database"


class ArchivedMonth(models.Model):
    """One month of history (notifications, deliveries, attempts, feed entries) that
    retention handled. `files` holds, per table, the archive file's URL, its row count and
    checksum, as verified by reading the file back."""

    month = models.DateField(unique=True, help_text="The month's first day (UTC).")
    state = models.CharField(max_length=10, choices=MonthState.choices)
    files = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    attempted_at = models.DateTimeField()
    archived_at = models.DateTimeField(null=True, blank=True)
    restored_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Rows were restored from the archive for support; retention drops them "
        "again after NOTIFY_RESTORE_KEEP_DAYS without archiving them a second time.",
    )
    erased_through = models.BigIntegerField(
        default=0,
        help_text="The last erasure ledger entry (notify.Erasure id) the files are known to "
        "be clean of: later entries are still to be taken out of them (docs/history.md).",
    )

    class Meta:
        ordering = ["-month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} ({self.state})"
