"""What the partitioned history tables share: the month column (`accepted_at`, the
notification's `created_at`) filled in for rows made through the ORM without it."""

from __future__ import annotations

from django.db import models


class MonthKeyQuerySet(models.QuerySet):
    """bulk_create fills each row's partition month first (see InNotificationMonth)."""

    def bulk_create(self, objs, *args, **kwargs):  # type: ignore[no-untyped-def]
        objs = list(objs)
        for obj in objs:
            if obj.accepted_at is None:
                obj.month_key_fill()
        return super().bulk_create(objs, *args, **kwargs)


class InNotificationMonth(models.Model):
    """A row of the history partitioned by its notification's month (`accepted_at`, the
    notification's `created_at`): the platform's own writes set it; a row made through the
    ORM without it takes it from its notification (or delivery) when saved."""

    objects = MonthKeyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if self.accepted_at is None:
            self.month_key_fill()
        super().save(*args, **kwargs)

    def month_key_fill(self) -> None:
        """Set `accepted_at` from the row this one belongs to."""
        raise NotImplementedError
