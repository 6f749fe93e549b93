"""Sends taken by their provider whose outcome a batch has not recorded yet.

A batch records its members' outcomes once per round, so between a provider taking a
message and the round's record there is a window in which a killed worker would leave
the delivery `sending` though its message went out, and the sweeper would send it again.
A mark in Redis, written right after the provider took the message, closes it: the
sweeper settles a stale claim that has one as delivered instead of sending it again. A
round's marks share one connection and one wait for their replies (`SentMarks`). Every
message of a batch is marked, the last of a round too: between its answer and its record
the round still reads the marks' replies, tells the breaker and writes its statement,
which a loaded box stretches to a tenth of a second and more. A lone send (a batch of
one) records at once and writes no mark: its window is the one a single send has always
had.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


def _key(delivery_id: int, claimed_at: datetime) -> str:
    # The claim's time is part of the key: a mark speaks only for the claim it was made
    # under, never for a later claim of the same delivery.
    return f"notify:sent:{delivery_id}:{claimed_at.timestamp():.6f}"


class SentMarks:
    """The sent marks of one round, on one Redis connection: each mark is written the
    moment its provider took the message, and the replies are read once, when the round
    ends. So a round costs one wait for Redis, not one per email, and each mark is on
    its way as early as a mark awaited alone would be (a worker killed after writing it
    leaves it to Redis, as it would leave a mark whose reply it never read). Use it as
    a context manager; without Redis the window is open again, as for any send before.
    """

    def __init__(self) -> None:
        self._pool: Any = None
        self._connection: Any = None
        self._pending = 0

    def __enter__(self) -> SentMarks:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def add(self, *, delivery_id: int, claimed_at: datetime, provider_message_id: str) -> None:
        """The provider took this claim's message (its id, if it gave one)."""
        try:
            if self._connection is None:
                self._pool = get_redis_connection("default").connection_pool
                self._connection = self._pool.get_connection()
            self._connection.send_command(
                "SET", _key(delivery_id, claimed_at), provider_message_id or "-",
                "EX", settings.NOTIFY_SENT_MARK_SECONDS,
            )  # fmt: skip
            self._pending += 1
        except RedisError:
            logger.warning("delivery %s: could not mark it sent", delivery_id, exc_info=True)
            self._drop()

    def close(self) -> None:
        """Read the replies of the round's marks and give the connection back."""
        if self._connection is None:
            return
        try:
            for _ in range(self._pending):
                self._connection.read_response()
        except RedisError:
            logger.warning("could not confirm %s sent marks", self._pending, exc_info=True)
            self._connection.disconnect()
        self._pool.release(self._connection)
        self._connection, self._pending = None, 0

    def _drop(self) -> None:
        """A connection whose replies are out of step is not given back as it is."""
        if self._connection is not None:
            self._connection.disconnect()
            self._pool.release(self._connection)
        self._connection, self._pending = None, 0


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
