"""Lookups every API module shares, failing with the one error shape."""

from __future__ import annotations

from notify.api.errors import ApiError
from notify.models import Recipient
from notify.selectors import recipient_get


def recipient_or_404(user_id: str) -> Recipient:
    """The recipient with this product user id, or a 404 `unknown_recipient`."""
    recipient = recipient_get(user_id=user_id)
    if recipient is None:
        raise ApiError(404, "unknown_recipient", f"No recipient with user_id {user_id!r}.")
    return recipient
