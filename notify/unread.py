"""The unread counter in Redis: INCR on insert, DECRBY what was actually marked.

Redis being down never breaks the feed: writers log and move on (the reconcile job
repairs the count later), and readers get None, meaning "unavailable".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db.models import Count, Q
from django_redis import get_redis_connection
from redis.exceptions import RedisError, WatchError

from notify.models import FeedEntry

logger = logging.getLogger(__name__)


def unread_key(recipient_id: int) -> str:
    return f"notify:unread:{recipient_id}"


def _redis():
    return get_redis_connection("default")


def feed_channel(recipient_id: int) -> str:
    """The Redis pub/sub channel that wakes this recipient's live streams."""
    return f"notify:feed:{recipient_id}"


def unread_increment_many(*, recipient_ids: Iterable[int]) -> None:
    """New unread entries (a recipient may come more than once): each counted, and the
    recipient's live streams woken, in one round trip."""
    try:
        pipe = _redis().pipeline(transaction=False)
        for recipient_id in recipient_ids:
            pipe.incr(unread_key(recipient_id))
            pipe.publish(feed_channel(recipient_id), "new")
        pipe.execute()
    except RedisError:
        logger.warning("unread counter: INCR failed for a batch of recipients")


def unread_decrement(*, recipient_id: int, by: int) -> None:
    """`by` entries were marked read. Never a SET: concurrent inserts stay counted."""
    if by <= 0:
        return
    try:
        _redis().decrby(unread_key(recipient_id), by)
    except RedisError:
        logger.warning("unread counter: DECRBY failed for recipient %s", recipient_id)


def unread_count(*, recipient_id: int, read: bytes | None = None) -> int | None:
    """The unread count from Redis; None when Redis cannot be reached.

    `read`: the counter's value when the caller already read its key (`unread_key`) in
    a round trip of its own; None reads it here.
    """
    value = read
    if value is None:
        try:
            value = _redis().get(unread_key(recipient_id))
        except RedisError:
            return None
    if value is None:
        # A flushed or never-seen key: seed it from PostgreSQL, once.
        value = _unread_in_database([recipient_id]).get(recipient_id, 0)
        try:
            _redis().set(unread_key(recipient_id), value, nx=True)
        except RedisError:
            return None
    # A read can race ahead of its insert's INCR for an instant; never show negatives.
    return max(0, int(value))


def _unread_in_database(recipient_ids: Iterable[int]) -> dict[int, int]:
    rows = (
        FeedEntry.objects.filter(recipient_id__in=list(recipient_ids))
        .values("recipient_id")
        .annotate(unread=Count("id", filter=Q(read_at__isnull=True)))
    )
    return {row["recipient_id"]: row["unread"] for row in rows}


def unread_reconcile(*, recipient_ids: Iterable[int]) -> int:
    """Set each recipient's counter to the database's count; returns how many changed.

    The key is WATCHed across the count, so a concurrent INCR/DECRBY makes this round
    skip that recipient instead of overwriting a newer value.
    """
    fixed = 0
    client = _redis()
    for recipient_id in recipient_ids:
        key = unread_key(recipient_id)
        try:
            with client.pipeline() as pipe:
                pipe.watch(key)
                current = pipe.get(key)
                expected = _unread_in_database([recipient_id]).get(recipient_id, 0)
                if current is not None and int(current) == expected:
                    pipe.unwatch()
                    continue
                pipe.multi()
                pipe.set(key, expected)
                pipe.execute()
                fixed += 1
        except WatchError:
            continue
        except RedisError:
            logger.warning("unread reconcile: Redis unavailable, stopping this round")
            break
    return fixed
