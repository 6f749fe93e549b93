"""The in-app feed: one entry per in-app notification a person can read."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from notify.month_key import InNotificationMonth


class FeedEntry(InNotificationMonth):
    """An in-app notification in a recipient's feed."""

    # Neither key has an index of its own: the feed's indexes lead with the recipient,
    # and the unique (notification, month) with the notification.
    recipient = models.ForeignKey(
        "notify.Recipient", on_delete=models.CASCADE, db_index=False, related_name="feed"
    )
    # One entry per notification: unique with `accepted_at`, the month the table is
    # partitioned by, which is the notification's own `created_at`.
    notification = models.ForeignKey(
        "notify.Notification",
        on_delete=models.CASCADE,
        db_constraint=False,
        db_index=False,
        related_name="feed_entries",
    )
    category = models.CharField(max_length=100)
    title = models.CharField(max_length=500)
    body = models.TextField(blank=True)
    url = models.CharField(max_length=2000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    # Copied from the notification: the feed is ordered by when events happened, ties
    # by when they were accepted.
    occurred_at = models.DateTimeField(db_default=Now())
    accepted_at = models.DateTimeField(blank=True)

    class Meta:
        verbose_name_plural = "feed entries"
        constraints = [
            models.UniqueConstraint(
                fields=["notification", "accepted_at"], name="uniq_feed_notification"
            )
        ]
        indexes = [
            models.Index(fields=["recipient", "-id"], name="feed_recipient_newest"),
            models.Index(
                fields=["recipient", "-occurred_at", "-accepted_at", "-id"],
                name="feed_recipient_occurred",
            ),
            models.Index(
                fields=["recipient"],
                name="feed_recipient_unread",
                condition=Q(read_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return self.title

    def month_key_fill(self) -> None:
        self.accepted_at = self.notification.created_at


# Models of this app kept in a module of their own; imported here so Django registers them.
