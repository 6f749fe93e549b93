"""In-app channel: the feed row is the delivery; the unread counter follows it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deliveries.channels.base import SendResult
from notify.feed import feed_entries_create
from notify.models import FeedEntry, Notification
from templates_admin.rendering import RenderedMessage, render_version, truncate_at_word

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion


def send(delivery: Delivery, version: TemplateVersion, context: dict[str, Any]) -> SendResult:
    """Write the feed entry (once per notification) and count it as unread."""
    entry = feed_entry_write(
        notification=delivery.notification, message=render_version(version, context)
    )
    return SendResult.delivered(provider_message_id=f"feed:{entry.pk}")


def feed_entry_write(*, notification: Notification, message: RenderedMessage) -> FeedEntry:
    """The feed entry for this rendered message (see `feed_entries_write`)."""
    return feed_entries_write(items=[(notification, message)])[notification.pk]


def feed_entries_write(
    *, items: list[tuple[Notification, RenderedMessage]]
) -> dict[object, FeedEntry]:
    """The feed entries for these rendered messages, in one statement, by notification id;
    each title cut to the column at a word.

    A payload field may be any length (a 600-character order number); the reader sees a
    title ending in whole words and an ellipsis, never a database error. The URL is left
    whole here: a link cut anywhere is broken, so notify's own cap is all it gets.
    """
    title_max = FeedEntry._meta.get_field("title").max_length
    return feed_entries_create(
        entries=[
            (notification, truncate_at_word(message.title, title_max), message.body, message.url)
            for notification, message in items
        ]
    )
