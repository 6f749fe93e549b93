"""Reads of the core domain: the feed page, recipients."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from django.db.models import Q, QuerySet
from django.db.models.functions import Lower

from notify.models import FeedEntry, Recipient


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


def recipients_matching(queryset: QuerySet[Recipient], term: str) -> QuerySet[Recipient]:
    """Exact or prefix match on user id, email (case-insensitive) or phone; each side of
    the OR has its own index (see the Recipient model), so this stays fast at scale."""
    return queryset.alias(email_lower=Lower("email")).filter(
        Q(user_id__startswith=term)
        | Q(email_lower__startswith=term.lower())
        | Q(phone__startswith=term)
    )
