"""Writes of the in-app feed: its entries and their read marks (the unread counter in
Redis follows both)."""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from notify.models import FeedEntry, Notification, Recipient
from notify.unread import unread_decrement, unread_increment


def feed_entry_create(*, notification: Notification, title: str, body: str, url: str) -> FeedEntry:
    """The notification's feed entry (one per notification); counted unread once.

    One INSERT … ON CONFLICT DO NOTHING: a second call (a retried send) finds the entry
    that exists and counts nothing. (Unique with accepted_at, the notification's
    created_at: the month the feed is partitioned by.)
    """
    entry = FeedEntry(
        notification=notification,
        recipient_id=notification.recipient_id,
        category=notification.category.key,
        title=title[: FeedEntry._meta.get_field("title").max_length],
        body=body,
        url=url[: FeedEntry._meta.get_field("url").max_length],
        created_at=timezone.now(),
    )
    entry.occurred_at, entry.accepted_at = notification.occurred_at, notification.created_at
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {FeedEntry._meta.db_table}
                (recipient_id, notification_id, category, title, body, url, created_at,
                 occurred_at, accepted_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (notification_id, accepted_at) DO NOTHING
            RETURNING id
            """,
            [entry.recipient_id, notification.pk, entry.category, entry.title, entry.body,
             entry.url, entry.created_at, entry.occurred_at, entry.accepted_at],
        )  # fmt: skip
        row = cursor.fetchone()
    if row is None:
        return FeedEntry.objects.get(notification=notification)
    entry.pk = row[0]
    recipient_id = notification.recipient_id
    transaction.on_commit(lambda: unread_increment(recipient_id=recipient_id))
    return entry


def feed_mark_read(
    *, recipient: Recipient, entry_ids: list[int] | None = None, everything: bool = False
) -> int:
    """Mark entries read; returns how many changed (and the counter drops by exactly that)."""
    entries = FeedEntry.objects.filter(recipient=recipient, read_at__isnull=True)
    if not everything:
        entries = entries.filter(pk__in=entry_ids or [])
    with transaction.atomic():
        marked = entries.update(read_at=timezone.now())
        if marked:
            transaction.on_commit(lambda: unread_decrement(recipient_id=recipient.pk, by=marked))
    return marked
