"""Which devices are live on the SSE stream right now.

A Redis key per device, holding the id of the connection that owns it, expiring after
NOTIFY_LIVE_TTL unless the stream's heartbeat renews it — so a server that dies with
open streams cannot leave devices "live" and pushless for long. Disconnect deletes the
key only if it still belongs to that connection (a quick reconnect keeps its own).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def live_key(device_id: object) -> str:
    return f"notify:live:device:{device_id}"


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
