"""Reads of the core domain: the feed page, a notification's status."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from notify.models import FeedEntry, Notification, Producer, Recipient


class BadCursor(ValueError):
    """The cursor was not one we issued."""


def encode_cursor(entry_id: int) -> str:
    return base64.urlsafe_b64encode(f"f:{entry_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind != "f":
            raise ValueError(kind)
        return int(value)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor(cursor) from None


@dataclass(frozen=True)
class FeedPage:
    entries: list[FeedEntry]
    next_cursor: str | None


def feed_page(*, recipient: Recipient, cursor: str | None, limit: int) -> FeedPage:
    """Newest first. The cursor is the last id seen, so inserts never shift a page."""
    entries = FeedEntry.objects.filter(recipient=recipient).order_by("-id")
    if cursor:
        entries = entries.filter(id__lt=decode_cursor(cursor))
    page = list(entries[: limit + 1])
    has_more = len(page) > limit
    page = page[:limit]
    return FeedPage(page, encode_cursor(page[-1].id) if has_more else None)


def recipient_get(*, user_id: str) -> Recipient | None:
    return Recipient.objects.filter(user_id=user_id).first()


def notification_status(*, producer: Producer, notification_id: Any) -> dict[str, Any] | None:
    """Per channel and target: status, reason, attempts, last error, template version."""
    notification = (
        Notification.objects.filter(pk=notification_id, producer=producer)
        .select_related("category")
        .first()
    )
    if notification is None:
        return None
    deliveries = notification.deliveries.select_related("template_version").order_by("pk")
    return {
        "notification_id": notification.pk,
        "category": notification.category.key,
        "created_at": notification.created_at,
        "deliveries": [
            {
                "channel": delivery.channel,
                "target": delivery.target,
                "status": delivery.status,
                "reason": delivery.reason,
                "attempts": delivery.attempts,
                "last_error": delivery.last_error,
                "template_version": (
                    delivery.template_version.number if delivery.template_version else None
                ),
                "next_attempt_at": delivery.next_attempt_at,
                "created_at": delivery.created_at,
                "updated_at": delivery.updated_at,
            }
            for delivery in deliveries
        ],
    }


def recipient_timeline(*, recipient: Recipient, page: int, per_page: int):
    """One page of a recipient's notifications, newest first, with every delivery and
    attempt loaded in a fixed number of queries (support's "what did they get?")."""
    from django.core.paginator import Paginator
    from django.db.models import Prefetch

    from deliveries.models import Delivery, DeliveryAttempt

    deliveries = Delivery.objects.select_related("template_version__template").prefetch_related(
        Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("number"))
    )
    notifications = (
        Notification.objects.filter(recipient=recipient)
        .select_related("category", "producer")
        .prefetch_related(Prefetch("deliveries", queryset=deliveries.order_by("pk")))
        .order_by("-created_at", "-pk")
    )
    return Paginator(notifications, per_page).get_page(page)


def recipients_matching(queryset, term: str):
    """Exact or prefix match on user id, email (case-insensitive) or phone; each side of
    the OR has its own index (see the Recipient model), so this stays fast at scale."""
    from django.db.models import Q
    from django.db.models.functions import Lower

    return queryset.alias(email_lower=Lower("email")).filter(
        Q(user_id__startswith=term)
        | Q(email_lower__startswith=term.lower())
        | Q(phone__startswith=term)
    )
