"""A token bucket in Redis, shared by every process (one atomic Lua script).

Used for per-key API limits; the clock is Redis's own, so machines with skewed clocks
still share one bucket fairly.
"""

from __future__ import annotations

from dataclasses import dataclass

from django_redis import get_redis_connection

# KEYS[1]: bucket. ARGV: rate (tokens/s), burst (capacity), cost, ttl (s), floor.
# A taker may only take while `floor` tokens would remain (a reserve kept for others).
# Returns {allowed (0/1), seconds to wait for `cost` tokens as a string, tokens left}.
_TAKE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local floor = tonumber(ARGV[5]) or 0
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 0
local wait = 0
if tokens - cost >= floor then
  tokens = tokens - cost
  allowed = 1
else
  wait = (cost + floor - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'at', now)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
return {allowed, tostring(wait), tostring(tokens)}
"""


@dataclass(frozen=True)
class Take:
    allowed: bool
    wait_seconds: float
    tokens_left: float = 0.0


def user_bucket_key(recipient_id: int) -> str:
    """The Redis key of an end user's API rate bucket (erasure removes it too)."""
    return f"notify:ratelimit:user:{recipient_id}"


def bucket_take(*, key: str, rate: float, burst: float, cost: int = 1, floor: float = 0.0) -> Take:
    """Take `cost` tokens from bucket `key` if it has them above `floor`; else say how
    long to wait. Raises redis errors to the caller, which decides whether to fail open
    or closed.
    """
    client = get_redis_connection("default")
    script = client.register_script(_TAKE)
    ttl = max(1, int(burst / rate) + 1)
    allowed, wait, left = script(keys=[key], args=[rate, burst, cost, ttl, floor])
    return Take(bool(int(allowed)), float(wait), float(left))
