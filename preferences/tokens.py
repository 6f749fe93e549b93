"""Signed tokens: one-click unsubscribe links and short-lived end-user tokens.

Both are `django.core.signing` values (HMAC over SECRET_KEY, with a timestamp) that
carry database ids only — no address or user id in clear — and a salt per purpose, so
one kind can never be replayed as the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core import signing

UNSUBSCRIBE_SALT = "notify.preferences.unsubscribe"
USER_TOKEN_SALT = "notify.preferences.user-token"
USER_TOKEN_PREFIX = "ut_"


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


def user_token_issue(*, recipient_id: int) -> str:
    return USER_TOKEN_PREFIX + signing.dumps({"r": recipient_id}, salt=USER_TOKEN_SALT)


def user_token_recipient_id(token: str) -> int | None:
    """The recipient a valid, unexpired user token belongs to, else None."""
    if not token.startswith(USER_TOKEN_PREFIX):
        return None
    try:
        data = signing.loads(
            token[len(USER_TOKEN_PREFIX) :],
            salt=USER_TOKEN_SALT,
            max_age=settings.NOTIFY_USER_TOKEN_TTL_SECONDS,
        )
        return int(data["r"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        return None
