"""In-app channel: the feed row is the delivery; the unread counter follows it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deliveries.channels.base import SendResult
from notify.services import feed_entry_create
from templates_admin.rendering import render_version

if TYPE_CHECKING:
    from deliveries.models import Delivery
    from templates_admin.models import TemplateVersion


def send(delivery: Delivery, version: TemplateVersion, context: dict[str, Any]) -> SendResult:
    """Write the feed entry (once per notification) and count it as unread."""
    message = render_version(version, context)
    entry = feed_entry_create(
        notification=delivery.notification,
        title=message.title,
        body=message.body,
        url=message.url,
    )
    return SendResult.delivered(provider_message_id=f"feed:{entry.pk}")
