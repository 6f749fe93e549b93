"""Which devices are live on the SSE stream right now.

A Redis key per device, holding the id of the connection that owns it, expiring after
NOTIFY_LIVE_TTL unless the stream's heartbeat renews it — so a server that dies with
open streams cannot leave devices "live" and pushless for long. Disconnect deletes the
key only if it still belongs to that connection (a quick reconnect keeps its own).

Being live is not enough to skip a push: the stream also records, per device, the feed
entries it has written to it, and the push sender skips only when the notification's
entry is among them (a push-only notification, or one whose in-app entry was never
written, is pushed to a live device too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

# How often a waiting push sender looks again; short, as the wait is bounded anyway.
_SEEN_POLL_SECONDS = 0.05

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def live_key(device_id: object) -> str:
    return f"notify:live:device:{device_id}"


def seen_key(device_id: object) -> str:
    return f"notify:live:device:{device_id}:seen"


def feed_seen_key(recipient_id: object) -> str:
    """The feed entries the stream wrote to any of this person's streams (device or not)."""
    return f"notify:feed:{recipient_id}:seen"


def _redis():
    return get_redis_connection("default")


def device_live_mark(*, device_id: int, connection_id: str) -> None:
    """The device has a stream open (called on connect and at every heartbeat)."""
    try:
        _redis().set(live_key(device_id), connection_id, ex=settings.NOTIFY_LIVE_TTL)
    except RedisError:
        logger.warning("live registry: could not mark device %s", device_id)


def device_live_clear(*, device_id: int, connection_id: str) -> None:
    """The stream closed: the device gets pushes again."""
    try:
        _redis().eval(_RELEASE, 1, live_key(device_id), connection_id)
    except RedisError:
        logger.warning("live registry: could not clear device %s; it expires", device_id)


def device_is_live(*, device_id: object) -> bool:
    """Whether the device is connected now. Unknown (Redis down) counts as not live:
    a duplicate push is better than a lost one."""
    try:
        return bool(_redis().exists(live_key(device_id)))
    except RedisError:
        return False


def devices_live(*, device_ids: Iterable[object]) -> set[str]:
    """Of these devices, those connected now (their ids as text), in one round trip
    whatever their number. Unknown (Redis down) counts as not live, as for one."""
    ids = list(dict.fromkeys(str(device_id) for device_id in device_ids))
    if not ids:
        return set()
    try:
        values = _redis().mget([live_key(device_id) for device_id in ids])
    except RedisError:
        return set()
    return {device_id for device_id, value in zip(ids, values, strict=True) if value is not None}


def feed_entry_mark_seen(*, device_id: int, entry_id: int) -> None:
    """The stream wrote feed entry `entry_id` to this device (called after each write)."""
    try:
        with _redis().pipeline(transaction=False) as pipe:
            pipe.sadd(seen_key(device_id), entry_id)
            pipe.expire(seen_key(device_id), settings.NOTIFY_LIVE_SEEN_TTL)
            pipe.execute()
    except RedisError:
        logger.warning("live registry: could not record entry %s on device %s", entry_id,
                       device_id)  # fmt: skip


def feed_entries_mark_seen_by(*, recipient_id: int, entry_ids: list[int]) -> None:
    """The stream wrote these feed entries to one of the person's streams (called after
    each batch it writes): a delay if unread counts them as read (docs/digests.md)."""
    if not entry_ids:
        return
    key = feed_seen_key(recipient_id)
    try:
        with _redis().pipeline(transaction=False) as pipe:
            pipe.sadd(key, *entry_ids)
            pipe.expire(key, settings.NOTIFY_FEED_SEEN_TTL)
            pipe.execute()
    except RedisError:
        logger.warning("live registry: could not record entries seen by %s", recipient_id)


def feed_entries_seen_by(entries: list[tuple[int, int]]) -> set[int]:
    """Of these (recipient id, feed entry id), the entry ids the stream wrote to the
    person within NOTIFY_FEED_SEEN_TTL — one round trip. Unknown (Redis down) counts as
    not seen: what waited for it goes out."""
    if not entries:
        return set()
    try:
        with _redis().pipeline(transaction=False) as pipe:
            for recipient_id, entry_id in entries:
                pipe.sismember(feed_seen_key(recipient_id), entry_id)
            answers = pipe.execute()
    except RedisError:
        logger.warning("live registry: could not read entries seen; treated as unseen")
        return set()
    return {entry_id for (_, entry_id), seen in zip(entries, answers, strict=True) if seen}


def feed_entry_seen(*, device_id: object, entry_id: int, wait_seconds: float = 0.0) -> bool:
    """Whether the stream wrote feed entry `entry_id` to the device, waiting up to
    `wait_seconds` for it (the entry is committed; the stream's wake-up may still be on
    its way). Unknown (Redis down) counts as not seen: the push goes out."""
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            if _redis().sismember(seen_key(device_id), entry_id):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_SEEN_POLL_SECONDS)
    except RedisError:
        return False
