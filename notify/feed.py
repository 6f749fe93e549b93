"""Writes of the in-app feed: its entries and their read marks (the unread counter in
Redis follows both)."""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from analytics.person_events import analytics_reads_write
from notify.links import link_is_safe
from notify.models import FeedEntry, Notification, Recipient
from notify.unread import unread_decrement, unread_increment_many
from pgarrays import array_literal, planned_once


def feed_entry_create(*, notification: Notification, title: str, body: str, url: str) -> FeedEntry:
    """The notification's feed entry (one per notification); counted unread once.

    One INSERT … ON CONFLICT DO NOTHING: a second call (a retried send) finds the entry
    that exists and counts nothing. (Unique with accepted_at, the notification's
    created_at: the month the feed is partitioned by.)
    """
    entries = feed_entries_create(entries=[(notification, title, body, url)])
    return entries[notification.pk]


# Many feed entries in one statement; arrays, so the text is the same for any count.
_ENTRIES_SQL = planned_once(
    f"""
    INSERT INTO {FeedEntry._meta.db_table}
        (recipient_id, notification_id, category, title, body, url, created_at,
         occurred_at, accepted_at)
    SELECT * FROM unnest(%(recipient)s::bigint[], %(notification)s::uuid[], %(category)s::text[],
                         %(title)s::text[], %(body)s::text[], %(url)s::text[],
                         %(created)s::timestamptz[], %(occurred)s::timestamptz[],
                         %(accepted)s::timestamptz[])
    ON CONFLICT (notification_id, accepted_at) DO NOTHING
    RETURNING id, notification_id
"""
)


def feed_entries_create(
    *, entries: list[tuple[Notification, str, str, str]]
) -> dict[object, FeedEntry]:
    """`feed_entry_create` for many (notification, title, body, url) at once: one
    INSERT for all, and one unread-counter round trip to Redis after commit. Returns the
    entries by notification id (an entry that existed already is read, not counted)."""
    if not entries:
        return {}
    now = timezone.now()
    built = []
    for notification, title, body, url in entries:
        entry = FeedEntry(
            notification=notification,
            recipient_id=notification.recipient_id,
            category=notification.category.key,
            title=title[: FeedEntry._meta.get_field("title").max_length],
            body=body,
            url=url[: FeedEntry._meta.get_field("url").max_length],
            created_at=now,
        )
        entry.occurred_at, entry.accepted_at = notification.occurred_at, notification.created_at
        built.append(entry)
    with connection.cursor() as cursor:
        cursor.execute(
            _ENTRIES_SQL,
            {
                "recipient": array_literal(e.recipient_id for e in built),
                "notification": array_literal(e.notification_id for e in built),
                "category": array_literal(e.category for e in built),
                "title": array_literal(e.title for e in built),
                "body": array_literal(e.body for e in built),
                "url": array_literal(e.url for e in built),
                "created": array_literal(e.created_at for e in built),
                "occurred": array_literal(e.occurred_at for e in built),
                "accepted": array_literal(e.accepted_at for e in built),
            },
        )
        inserted = {str(notification_id): pk for pk, notification_id in cursor.fetchall()}
    found: dict[object, FeedEntry] = {}
    counted: list[int] = []
    for entry in built:
        pk = inserted.get(str(entry.notification_id))
        if pk is None:
            found[entry.notification_id] = FeedEntry.objects.get(
                notification_id=entry.notification_id
            )
            continue
        entry.pk = pk
        found[entry.notification_id] = entry
        counted.append(entry.recipient_id)
    if counted:
        transaction.on_commit(lambda: unread_increment_many(recipient_ids=counted))
    return found


def feed_mark_read(
    *, recipient: Recipient, entry_ids: list[int] | None = None, everything: bool = False
) -> int:
    """Mark entries read; returns how many changed (and the counter drops by exactly that)."""
    entries = FeedEntry.objects.filter(recipient=recipient, read_at__isnull=True)
    if not everything:
        entries = entries.filter(pk__in=entry_ids or [])
    with transaction.atomic():
        now = timezone.now()
        marked = entries.update(read_at=now)
        if marked:
            analytics_reads_write(recipient_id=recipient.pk, read_at=now)
            transaction.on_commit(lambda: unread_decrement(recipient_id=recipient.pk, by=marked))
    return marked


def feed_entry_document(entry: FeedEntry) -> dict:
    """A feed entry as the feed API and the live stream show it (one shape for both).
    A link that is not safe to show (notify.links; entries written before links were
    checked at send) is left out, for every client."""
    return {
        "id": entry.pk,
        "notification_id": entry.notification_id,
        "category": entry.category,
        "title": entry.title,
        "body": entry.body,
        "url": entry.url if link_is_safe(entry.url) else "",
        "created_at": entry.created_at,
        # Arrival order is the feed's; a client places an entry by when it happened.
        "occurred_at": entry.occurred_at,
        "read_at": entry.read_at,
    }
