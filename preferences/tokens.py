"""Signed links: one-click unsubscribe and the preference center.

Each is a `django.core.signing` value (HMAC over SECRET_KEY, with a timestamp; made by
`notify.signed`, which writes the same value for less, since every email has one) that
carries database ids only — no address or user id in clear — under a salt of its own, so
no other signed value (a user token, the other kind of link) can be replayed as one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from django.conf import settings
from django.core import signing

from notify.signed import signed_dumps

UNSUBSCRIBE_SALT = "notify.preferences.unsubscribe"
PREFERENCE_CENTER_SALT = "notify.preferences.center"


@dataclass(frozen=True)
class UnsubscribeScope:
    recipient_id: int
    category_id: int
    channel: str
    # The message the link came in, (id, accepted_at), when the link names it: the
    # unsubscribe is then counted for that message (and its campaign).
    delivery: tuple[int, datetime] | None = None


def unsubscribe_token(
    *,
    recipient_id: int,
    category_id: int,
    channel: str,
    delivery: tuple[int, datetime] | None = None,
) -> str:
    """A one-click token; `delivery` (id, accepted_at) names the message it is sent in
    (ids and a time in microseconds, like the rest: nothing about the person in clear)."""
    data: dict[str, int | str] = {"r": recipient_id, "c": category_id, "ch": channel}
    if delivery is not None:
        data["d"] = delivery[0]
        data["a"] = _microseconds(delivery[1])
    return signed_dumps(data, salt=UNSUBSCRIBE_SALT)


def unsubscribe_token_read(token: str) -> UnsubscribeScope | None:
    """The scope a valid token names; None for forged, tampered or expired ones."""
    try:
        data = signing.loads(
            token, salt=UNSUBSCRIBE_SALT, max_age=settings.NOTIFY_UNSUBSCRIBE_TOKEN_MAX_AGE
        )
        delivery = None
        if "d" in data:  # a link made before links named their message has none
            delivery = (int(data["d"]), _from_microseconds(int(data["a"])))
        return UnsubscribeScope(int(data["r"]), int(data["c"]), str(data["ch"]), delivery)
    except (signing.BadSignature, KeyError, TypeError, ValueError, OverflowError):
        return None


def unsubscribe_url(
    *,
    recipient_id: int,
    category_id: int,
    channel: str,
    delivery: tuple[int, datetime] | None = None,
) -> str:
    token = unsubscribe_token(
        recipient_id=recipient_id, category_id=category_id, channel=channel, delivery=delivery
    )
    return f"{settings.NOTIFY_PUBLIC_URL}/u/{token}"


def _microseconds(moment: datetime) -> int:
    """A time as whole microseconds since the epoch (exact, unlike a float)."""
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _from_microseconds(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class LinkProblem(Enum):
    """Why a preference-center link opens nothing."""

    TAMPERED = "tampered"  # not one we signed (or cut short, or signed under an old key)
    EXPIRED = "expired"  # older than NOTIFY_PREFERENCE_CENTER_LINK_MAX_AGE


@dataclass(frozen=True)
class CenterLink:
    """What a well-signed, unexpired preference-center link names."""

    recipient_id: int
    issued_at_us: int  # when it was minted, in microseconds since the epoch


def preference_center_token(*, recipient_id: int, now_us: int | None = None) -> str:
    """A preference-center token for the recipient. It carries when it was minted, so a
    revocation (a "not before" time per recipient) can refuse it without minting reading
    anything."""
    issued = time.time_ns() // 1000 if now_us is None else now_us
    return signed_dumps({"r": recipient_id, "i": issued}, salt=PREFERENCE_CENTER_SALT)


def preference_center_token_read(token: str) -> CenterLink | LinkProblem:
    """The link a token names, or why it names none: expired apart from forged or
    tampered, so the page can tell the person which. Revocation is checked by the
    caller (it needs the database)."""
    try:
        data = signing.loads(
            token,
            salt=PREFERENCE_CENTER_SALT,
            max_age=settings.NOTIFY_PREFERENCE_CENTER_LINK_MAX_AGE,
        )
    except signing.SignatureExpired:
        return LinkProblem.EXPIRED
    except (signing.BadSignature, UnicodeError, ValueError):
        return LinkProblem.TAMPERED
    try:
        return CenterLink(recipient_id=int(data["r"]), issued_at_us=int(data["i"]))
    except (KeyError, TypeError, ValueError):
        return LinkProblem.TAMPERED


def preference_center_token_recipient_id(token: str) -> int | None:
    """The recipient a link of ours names, however old: only to say why it opens nothing
    in the person's language. None for a link we did not sign."""
    try:
        return int(signing.loads(token, salt=PREFERENCE_CENTER_SALT)["r"])
    except (signing.BadSignature, UnicodeError, ValueError, KeyError, TypeError):
        return None


def preference_center_url(*, recipient_id: int) -> str:
    """The absolute address of the recipient's preference center (a fresh link)."""
    token = preference_center_token(recipient_id=recipient_id)
    return f"{settings.NOTIFY_PUBLIC_URL}/preferences/{token}"
