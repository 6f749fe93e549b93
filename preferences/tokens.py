"""Signed one-click unsubscribe links.

A `django.core.signing` value (HMAC over SECRET_KEY, with a timestamp) that carries
database ids only — no address or user id in clear — under a salt of its own, so no
other signed value (a user token) can be replayed as one.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core import signing

UNSUBSCRIBE_SALT = "notify.preferences.unsubscribe"


@dataclass(frozen=True)
class UnsubscribeScope:
    recipient_id: int
    category_id: int
    channel: str


def unsubscribe_token(*, recipient_id: int, category_id: int, channel: str) -> str:
    return signing.dumps(
        {"r": recipient_id, "c": category_id, "ch": channel}, salt=UNSUBSCRIBE_SALT
    )


def unsubscribe_token_read(token: str) -> UnsubscribeScope | None:
    """The scope a valid token names; None for forged, tampered or expired ones."""
    try:
        data = signing.loads(
            token, salt=UNSUBSCRIBE_SALT, max_age=settings.NOTIFY_UNSUBSCRIBE_TOKEN_MAX_AGE
        )
        return UnsubscribeScope(int(data["r"]), int(data["c"]), str(data["ch"]))
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        return None


def unsubscribe_url(*, recipient_id: int, category_id: int, channel: str) -> str:
    token = unsubscribe_token(recipient_id=recipient_id, category_id=category_id, channel=channel)
    return f"{settings.NOTIFY_PUBLIC_URL}/u/{token}"
