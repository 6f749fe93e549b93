"""Short-lived end-user tokens: a product backend mints one for a signed-in person, whose
browser or app then reads only that person's own feed, counter, stream and preferences.

A `django.core.signing` value (HMAC over SECRET_KEY, with a timestamp) that carries the
recipient's database id only, under a salt of its own so no other signed value of the
platform can be replayed as one.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

from notify.signed import signed_dumps

USER_TOKEN_SALT = "notify.preferences.user-token"  # unchanged: issued tokens stay valid
USER_TOKEN_PREFIX = "ut_"


def user_token_issue(*, recipient_id: int) -> str:
    """A token for the recipient, valid for NOTIFY_USER_TOKEN_TTL_SECONDS."""
    return USER_TOKEN_PREFIX + signed_dumps({"r": recipient_id}, salt=USER_TOKEN_SALT)


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
