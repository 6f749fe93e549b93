"""Sends taken by their provider whose outcome a batch has not recorded yet.

A batch records its members' outcomes once per round, so between a provider taking a
message and the round's record there is a window in which a killed worker would leave
the delivery `sending` though its message went out, and the sweeper would send it again.
A mark in Redis, written right after the provider took the message, closes it: the
sweeper settles a stale claim that has one as delivered instead of sending it again. A
lone send (a batch of one) records at once and writes no mark.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


def _key(delivery_id: int, claimed_at: datetime) -> str:
    # The claim's time is part of the key: a mark speaks only for the claim it was made
    # under, never for a later claim of the same delivery.
    return f"notify:sent:{delivery_id}:{claimed_at.timestamp():.6f}"


def sent_mark(*, delivery_id: int, claimed_at: datetime, provider_message_id: str) -> None:
    """The provider took this claim's message (its id, if it gave one)."""
    try:
        get_redis_connection("default").set(
            _key(delivery_id, claimed_at), provider_message_id or "-",
            ex=settings.NOTIFY_SENT_MARK_SECONDS,
        )  # fmt: skip
    except RedisError:  # without it the window is open again, as for any send before
        logger.warning("delivery %s: could not mark it sent", delivery_id, exc_info=True)


def sent_marks_read(*, claims: Sequence[tuple[int, datetime]]) -> dict[int, str]:
    """The marked claims among (delivery id, claimed_at): id → provider message id."""
    if not claims:
        return {}
    keys = [_key(delivery_id, claimed_at) for delivery_id, claimed_at in claims]
    try:
        values = get_redis_connection("default").mget(keys)
    except RedisError:
        logger.warning("could not read the sent marks; stale claims are sent again")
        return {}
    found = {}
    for (delivery_id, _), value in zip(claims, values, strict=True):
        if value is not None:
            text = value.decode() if isinstance(value, bytes) else str(value)
            found[delivery_id] = "" if text == "-" else text
    return found
