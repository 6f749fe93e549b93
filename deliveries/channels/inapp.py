"""In-app channel: the feed row is the delivery; the unread counter follows it.

A "send test to me" delivery (sealed as a test send) gets its title marked, so a test
never passes for a real notification in the feed.

A link that is not safe to open (`notify.links.link_is_safe`: anything but an http(s)
URL or a path on the site, e.g. `javascript:…`) is dropped and the entry written without
it: the person still gets the message, with nothing to click. Validation refuses such a
template at save; this holds for a version written past it, or data that renders one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from deliveries.channels.base import SendResult
from notify.feed import feed_entries_create
from notify.links import link_is_safe
from notify.models import FeedEntry, Notification
from preferences.gate import test_send_sealed
from templates_admin.rendering import RenderedMessage, render_version, truncate_at_word

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion


TEST_TITLE_PREFIX = "[Test] "


def send(delivery: Delivery, version: TemplateVersion, context: dict[str, Any]) -> SendResult:
    """Write the feed entry (once per notification) and count it as unread."""
    [answer] = send_many([(delivery, version, context)])
    if isinstance(answer, Exception):
        raise answer
    return answer


def send_many(
    items: list[tuple[Delivery, TemplateVersion, dict[str, Any]]],
) -> list[SendResult | Exception]:
    """Render each and write the feed entries in one statement (once per notification),
    counted as unread; one answer per item, in order (a render that raised is its
    exception, for the caller to classify)."""
    answers: list[SendResult | Exception | None] = []
    written: list[tuple[int, Notification, RenderedMessage]] = []
    for delivery, version, context in items:
        try:
            message = render_version(version, context)
        except Exception as error:
            answers.append(error)
            continue
        if test_send_sealed(
            notification_id=delivery.notification_id,
            channel=delivery.channel,
            target=delivery.target,
            seal=delivery.gate_seal,
        ):
            message = replace(message, title=TEST_TITLE_PREFIX + message.title)
        written.append((len(answers), delivery.notification, message))
        answers.append(None)
    entries = feed_entries_write(items=[(n, message) for _, n, message in written])
    for index, notification, _ in written:
        answers[index] = SendResult.delivered(
            provider_message_id=f"feed:{entries[notification.pk].pk}"
        )
    return [answer for answer in answers if answer is not None]


def feed_entries_write(
    *, items: list[tuple[Notification, RenderedMessage]]
) -> dict[object, FeedEntry]:
    """The feed entries for these rendered messages, in one statement, by notification id;
    each title cut to the column at a word, and each link kept only if it is safe to open.

    A payload field may be any length (a 600-character order number); the reader sees a
    title ending in whole words and an ellipsis, never a database error. The URL is left
    whole here: a link cut anywhere is broken, so notify's own cap is all it gets. A link
    that is not safe (`javascript:…`, see the module's docstring) is left out: the entry
    is written without one.
    """
    title_max = FeedEntry._meta.get_field("title").max_length
    return feed_entries_create(
        entries=[
            (
                notification,
                truncate_at_word(message.title, title_max),
                message.body,
                message.url if link_is_safe(message.url) else "",
            )
            for notification, message in items
        ]
    )
