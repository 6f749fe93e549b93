"""Lookups every API module shares, failing with the one error shape."""

from __future__ import annotations

import re

from notify.api.errors import ApiError
from notify.api_keys import api_key_may_send
from notify.models import ApiKey, Category, Recipient
from notify.payloads import payload_problem
from notify.selectors import recipient_get, recipient_id_get
from notify.services import category_by_key

USER_ID_MAX = Recipient._meta.get_field("user_id").max_length
# Control characters and lone surrogates: PostgreSQL refuses NUL, and none is an id.
_USER_ID_BAD = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
# The same rule for the OpenAPI schema (ECMA regex; a URL cannot carry a lone surrogate),
# plus the "/" that no path segment holds.
USER_ID_PATTERN = r"^[^\u0000-\u001f\u007f/]+$"


def user_id_checked(user_id: str) -> str:
    """The path's user_id, or a 400 when it cannot be one (too long, control characters)."""
    if not user_id or len(user_id) > USER_ID_MAX:
        raise ApiError(
            400, "invalid", f"user_id must be 1 to {USER_ID_MAX} characters.", field="user_id"
        )
    if _USER_ID_BAD.search(user_id):
        raise ApiError(
            400, "invalid", "user_id may not contain control characters.", field="user_id"
        )
    return user_id


def recipient_or_404(user_id: str) -> Recipient:
    """The recipient with this product user id, or a 404 `unknown_recipient`."""
    recipient = recipient_get(user_id=user_id_checked(user_id))
    if recipient is None:
        raise ApiError(404, "unknown_recipient", f"No recipient with user_id {user_id!r}.")
    return recipient


def recipient_id_or_404(user_id: str) -> int:
    """The id of the recipient with this product user id (from the process's cache when
    warm: see recipient_id_get), or a 404 `unknown_recipient`."""
    recipient_id = recipient_id_get(user_id=user_id_checked(user_id))
    if recipient_id is None:
        raise ApiError(404, "unknown_recipient", f"No recipient with user_id {user_id!r}.")
    return recipient_id


def category_or_422(key: str) -> Category:
    """The category with this key, or a 422 `unknown_category` naming the field."""
    category = category_by_key(key=key)
    if category is None:
        raise ApiError(422, "unknown_category", f"No category {key!r}.", field="category")
    return category


def category_allowed(api_key: ApiKey, category: Category) -> None:
    """A 403 `category_not_allowed` unless this key may send the category."""
    if not api_key_may_send(api_key=api_key, category=category):
        raise ApiError(
            403,
            "category_not_allowed",
            f"This API key may not send {category.key!r}.",
            field="category",
        )


def payload_fits(category: Category, payload: dict) -> None:
    """A 400 `invalid_payload` naming the field unless the payload fits the schema."""
    problem = payload_problem(category.payload_schema, payload)
    if problem is not None:
        raise ApiError(400, "invalid_payload", problem.message, field=problem.field)
