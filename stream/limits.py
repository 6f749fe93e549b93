"""What bounds the live stream: open streams per user and per API key, the process's one
Redis pool, and the reconnect advice a stream ends with.

Open streams are counted in Redis (every web process shares the count) as one sorted set
per user and per key, a member per connection scored by when it lapses: a heartbeat
renews it, a clean close removes it, and a server that dies with open streams leaves
members that lapse after NOTIFY_LIVE_TTL instead of slots lost for good. Taking a slot
checks and adds in one Lua script, so concurrent connects cannot both take the last one.
When Redis cannot be reached the stream is let through (it then polls the database):
the limit guards our resources, and refusing every stream would be worse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import weakref
from dataclasses import dataclass

import redis.asyncio as aioredis
from django.conf import settings
from redis.exceptions import RedisError

from deliveries.pipeline.retry import jittered

logger = logging.getLogger(__name__)

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= tonumber(ARGV[2 + i]) then return i end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + tonumber(ARGV[2]), ARGV[1])
  redis.call('EXPIRE', key, math.ceil(tonumber(ARGV[2])) + 1)
end
return 0
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('EXPIRE', key, math.ceil(tonumber(ARGV[2])) + 1)
end
return 0
"""

# One pool per event loop (a server process runs one): every stream's pub/sub and every
# slot update borrow from it, so open streams never mean one pool (and sockets) each.
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.ConnectionPool] = (
    weakref.WeakKeyDictionary()
)


def stream_redis() -> aioredis.Redis:
    """A client on this process's shared stream pool (bounded; waits briefly when full)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=settings.NOTIFY_STREAM_REDIS_MAX_CONNECTIONS,
            timeout=settings.REDIS_SOCKET_TIMEOUT,
            socket_connect_timeout=settings.REDIS_SOCKET_TIMEOUT,
        )
        _pools[loop] = pool
    return aioredis.Redis(connection_pool=pool)


@dataclass(frozen=True)
class StreamSlot:
    """One open stream's place in the counts of its user (and key)."""

    connection_id: str
    keys: tuple[str, ...]


class TooManyStreams(Exception):
    """The user or the key already has the most streams open."""


def _limits(*, recipient_id: int, api_key_id: int | None) -> list[tuple[str, int, str]]:
    scopes = [
        (
            f"notify:streams:user:{recipient_id}",
            settings.NOTIFY_STREAM_MAX_PER_USER,
            f"This user already has {settings.NOTIFY_STREAM_MAX_PER_USER} streams open.",
        )
    ]
    if api_key_id is not None:
        scopes.append(
            (
                f"notify:streams:key:{api_key_id}",
                settings.NOTIFY_STREAM_MAX_PER_KEY,
                f"This API key already has {settings.NOTIFY_STREAM_MAX_PER_KEY} streams open.",
            )
        )
    return scopes


async def stream_slot_take(
    *, recipient_id: int, api_key_id: int | None, connection_id: str
) -> StreamSlot:
    """Count a new stream for its user and key; raises TooManyStreams at a limit."""
    scopes = _limits(recipient_id=recipient_id, api_key_id=api_key_id)
    keys = tuple(key for key, _, _ in scopes)
    try:
        full = await stream_redis().eval(
            _TAKE,
            len(keys),
            *keys,
            connection_id,
            settings.NOTIFY_LIVE_TTL,
            *(limit for _, limit, _ in scopes),
        )
    except RedisError:
        logger.warning("stream limits: Redis unavailable, letting the stream open")
        return StreamSlot(connection_id, ())
    if int(full):
        raise TooManyStreams(scopes[int(full) - 1][2])
    return StreamSlot(connection_id, keys)


async def stream_slot_renew(slot: StreamSlot) -> None:
    """The stream is still open (called at each heartbeat)."""
    if not slot.keys:
        return
    with contextlib.suppress(RedisError):  # it lapses at worst; the next beat tries again
        await stream_redis().eval(
            _RENEW, len(slot.keys), *slot.keys, slot.connection_id, settings.NOTIFY_LIVE_TTL
        )


async def stream_slot_release(slot: StreamSlot) -> None:
    """The stream closed: its place is free at once."""
    try:
        for key in slot.keys:
            await stream_redis().zrem(key, slot.connection_id)
    except RedisError:
        pass  # it lapses after NOTIFY_LIVE_TTL


def reconnect_after_ms(rng: random.Random | None = None) -> int:
    """The SSE `retry:` advice, spread by ±NOTIFY_STREAM_RETRY_JITTER so clients that
    lost their streams together (a restart, a lifetime ending) do not return together."""
    base = settings.NOTIFY_STREAM_RETRY_MS
    return max(1, int(jittered(base, jitter=settings.NOTIFY_STREAM_RETRY_JITTER, rng=rng)))


def stream_lifetime(rng: random.Random | None = None) -> float:
    """Seconds this stream may stay open: NOTIFY_STREAM_MAX_LIFETIME, shortened by up to
    the jitter fraction so streams opened together do not all end together."""
    rng = rng or random
    lifetime = settings.NOTIFY_STREAM_MAX_LIFETIME
    shortest = max(0.0, 1.0 - settings.NOTIFY_STREAM_RETRY_JITTER)
    return lifetime * rng.uniform(shortest, 1.0)
