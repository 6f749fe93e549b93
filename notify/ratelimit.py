"""A token bucket in Redis, shared by every process (one atomic Lua script).

Used for per-key API limits; the clock is Redis's own, so machines with skewed clocks
still share one bucket fairly.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from django_redis import get_redis_connection
from redis.exceptions import NoScriptError

# The bucket's take, shared with the admission of a round of provider sends
# (deliveries/pipeline/pressure.py). Expects `now` and the locals bucket (its key), rate
# (tokens/s), burst (capacity), want, ttl (s), floor and partial. A taker may only take
# while `floor` tokens would remain (a reserve kept for others): all of `want` or nothing,
# or with `partial` as many whole tokens as there are, up to `want`. Leaves `granted`,
# `tokens` (left) and `wait` (seconds until the next take could succeed; 0 when all
# of `want` was granted).
#
# The bucket is one string, its tokens and the time they were counted as two doubles,
# written with its expiry in one SET: a GET and a SET cost Redis less per take than the
# hash it was before (HMGET, HSET, EXPIRE), on every API request. Bucket keys changed
# with the format (bucket_key), so a process of either kind never reads the other's.
BUCKET_TAKE_LUA = """
local held = redis.call('GET', bucket)
local tokens, at = burst, now
if held and #held == 16 then tokens, at = struct.unpack('<d<d', held) end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local granted = 0
if partial then
  granted = math.max(0, math.min(want, math.floor(tokens - floor)))
elseif tokens - want >= floor then
  granted = want
end
tokens = tokens - granted
local wait = 0
if granted < want then
  local next_cost = want
  if partial then next_cost = 1 end
  wait = (next_cost + floor - tokens) / rate
end
redis.call('SET', bucket, struct.pack('<d<d', tokens, now), 'EX', ttl)
"""

# KEYS[1]: bucket; KEYS[2], when given: a string key read in the same call. ARGV: rate
# (tokens/s), burst (capacity), cost, ttl (s), floor. Returns {allowed (0/1), seconds to
# wait for `cost` tokens as a string, tokens left, KEYS[2]'s value (nil when absent or
# not asked for)}.
_TAKE = (
    """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local bucket = KEYS[1]
local rate, burst, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ttl, floor, partial = tonumber(ARGV[4]), tonumber(ARGV[5]) or 0, false
"""
    + BUCKET_TAKE_LUA
    + """
local allowed = 0
if granted > 0 then allowed = 1 end
local read = false
if KEYS[2] then read = redis.call('GET', KEYS[2]) end
return {allowed, tostring(wait), tostring(tokens), read}
"""
)


# Hashed once here: redis-py's register_script would hash the source on every request.
_TAKE_SHA = hashlib.sha1(_TAKE.encode()).hexdigest().encode()


@functools.lru_cache(maxsize=1024)
def _take_args(rate: float, burst: float, cost: int, floor: float) -> tuple[bytes, ...]:
    """The script's ARGV for one bucket's settings, encoded as redis-py would (repr), once:
    a caller's settings rarely change, and encoding them again costs every take."""
    ttl = max(1, int(burst / rate) + 1)
    return tuple(repr(value).encode() for value in (rate, burst, cost, ttl, floor))


@dataclass(frozen=True)
class Take:
    allowed: bool
    wait_seconds: float
    tokens_left: float = 0.0
    # The value of the key asked for with `read_along` (None when absent or not asked).
    read_along: bytes | None = None


def bucket_key(kind: str, name: object) -> str:
    """The Redis key of a token bucket: `kind` (key, user, provider) and its owner."""
    return f"notify:bucket:{kind}:{name}"


def user_bucket_key(recipient_id: int) -> str:
    """The Redis key of an end user's API rate bucket (erasure removes it too)."""
    return bucket_key("user", recipient_id)


def bucket_take(
    *,
    key: str,
    rate: float,
    burst: float,
    cost: int = 1,
    floor: float = 0.0,
    read_along: str | None = None,
) -> Take:
    """Take `cost` tokens from bucket `key` if it has them above `floor`; else say how
    long to wait. With `read_along`, that string key's value comes back in the same round
    trip (whether or not the take succeeds), so a request whose answer is one Redis read
    pays one round trip for its rate limit and its answer. Raises redis errors to the
    caller, which decides whether to fail open or closed.
    """
    client = get_redis_connection("default")
    keys = (key,) if read_along is None else (key, read_along)
    args = (*keys, *_take_args(rate, burst, cost, floor))
    try:
        allowed, wait, left, read = client.evalsha(_TAKE_SHA, len(keys), *args)
    except NoScriptError:  # a new or flushed Redis: EVAL runs it and caches it there
        allowed, wait, left, read = client.eval(_TAKE, len(keys), *args)
    return Take(bool(int(allowed)), float(wait), float(left), read)
