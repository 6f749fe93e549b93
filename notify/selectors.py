"""Reads of the core domain: the feed page, recipients."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.db.models.functions import Lower

from notify.cache import TtlCache
from notify.models import FeedEntry, Recipient


class BadCursor(ValueError):
    """The cursor was not one we issued."""


# A cursor is the position of the last entry seen: (occurred_at, accepted_at, id), the
# times in microseconds since the epoch. Cursors from before the feed followed
# occurred_at ("f:<id>") still work: the entry they name gives the position.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _moment(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def encode_cursor(entry: FeedEntry) -> str:
    raw = f"o:{_micros(entry.occurred_at)}:{_micros(entry.accepted_at)}:{entry.id}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, datetime, int] | int:
    """The position a cursor names, or (an older cursor) the id of its entry."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind == "f":
            return int(value)
        if kind != "o":
            raise ValueError(kind)
        occurred, accepted, entry_id = (int(part) for part in value.split(":"))
        return _moment(occurred), _moment(accepted), entry_id
    except (binascii.Error, UnicodeDecodeError, ValueError, OverflowError):
        raise BadCursor(cursor) from None


@dataclass(frozen=True)
class FeedPage:
    entries: list[FeedEntry]
    next_cursor: str | None


def feed_page(*, recipient: Recipient, cursor: str | None, limit: int) -> FeedPage:
    """Latest event first: by occurred_at, ties by acceptance, then id.

    The cursor is the position of the last entry seen, so an entry written later (a
    late event) lands in its place: before the cursor it is not repeated, after it it
    is on a next page, and nothing already listed shifts.
    """
    entries = FeedEntry.objects.filter(recipient=recipient).order_by(
        "-occurred_at", "-accepted_at", "-id"
    )
    if cursor:
        position = decode_cursor(cursor)
        if isinstance(position, int):
            anchor = FeedEntry.objects.filter(recipient=recipient, pk=position).first()
            if anchor is None:
                raise BadCursor(cursor)
            position = (anchor.occurred_at, anchor.accepted_at, anchor.id)
        occurred, accepted, entry_id = position
        entries = entries.filter(
            Q(occurred_at__lt=occurred)
            | Q(occurred_at=occurred, accepted_at__lt=accepted)
            | Q(occurred_at=occurred, accepted_at=accepted, id__lt=entry_id)
        )
    page = list(entries[: limit + 1])
    has_more = len(page) > limit
    page = page[:limit]
    return FeedPage(page, encode_cursor(page[-1]) if has_more else None)


def recipient_get(*, user_id: str) -> Recipient | None:
    return Recipient.objects.filter(user_id=user_id).first()


# user id -> recipient id, for the reads that need the id alone (the unread count, an
# end-user token's check), so that polling them costs no query. Unknown ids are not kept:
# a person registered a moment ago is found at once.
_recipient_ids: TtlCache[int | None] = TtlCache(
    lambda: settings.NOTIFY_AUTH_CACHE_SECONDS, keep_none=False
)


def recipient_id_get(*, user_id: str) -> int | None:
    """The id of the recipient with this user id, or None.

    Cached in the process for NOTIFY_AUTH_CACHE_SECONDS: an erased person's id is
    forgotten at once by the process that erased them (recipient_id_forget), and by the
    others within that time.
    """
    if "\x00" in user_id:
        return None  # PostgreSQL refuses NUL in text, so no recipient has one
    return _recipient_ids.get(
        user_id,
        lambda: Recipient.objects.filter(user_id=user_id).values_list("pk", flat=True).first(),
    )


def recipient_id_cached(*, user_id: str) -> int | None:
    """recipient_id_get's answer when this process has it cached, else None; no query."""
    return _recipient_ids.peek(user_id)


def recipient_id_forget(*, user_id: str) -> None:
    """This process stops answering recipient_id_get from its cache for this user id."""
    _recipient_ids.forget(user_id)


def recipients_matching(queryset: QuerySet[Recipient], term: str) -> QuerySet[Recipient]:
    """Exact or prefix match on user id, email (case-insensitive) or phone; each side of
    the OR has its own index (see the Recipient model), so this stays fast at scale."""
    return queryset.alias(email_lower=Lower("email")).filter(
        Q(user_id__startswith=term)
        | Q(email_lower__startswith=term.lower())
        | Q(phone__startswith=term)
    )
