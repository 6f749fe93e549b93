"""Circuit breaker per provider, shared by all workers through Redis.

closed → (NOTIFY_BREAKER_FAILURES transient failures within NOTIFY_BREAKER_WINDOW) →
open for NOTIFY_BREAKER_COOLDOWN → half-open: exactly one sender probes (a lock with a
timeout, so a probe lost with its worker frees itself) → closed on success, open again
on failure. While open, deliveries are rescheduled past the cool-down, not failed.
Every transition happens inside one Lua script, so concurrent workers agree on it; it
is logged once, by the worker that made it, and readable as `notify:breaker:<p>:state`.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

# The breaker's entry check, for the admission of a round of sends
# (deliveries/pipeline/pressure.py). KEYS[1..3]: state, open_until, probe lock;
# ARGV[1]: the probe lock's milliseconds. Returns {0, wait, state, 0, 0, 'breaker'} when
# the breaker lets nothing through now; else leaves `now`, `state` and `probe` (1: this
# caller holds the half-open probe) and `changed` (1: it moved the breaker to half-open).
BREAKER_ENTRY_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('GET', KEYS[1]) or 'closed'
local probe, changed = 0, 0
if state ~= 'closed' then
  local open_until = tonumber(redis.call('GET', KEYS[2]) or '0')
  if now < open_until then return {0, tostring(open_until - now), state, 0, 0, 'breaker'} end
  if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[1]) then
    local left = redis.call('PTTL', KEYS[3])
    if left < 0 then left = 0 end
    return {0, tostring(left / 1000), 'half_open', 0, 0, 'breaker'}
  end
  if state ~= 'half_open' then
    redis.call('SET', KEYS[1], 'half_open')
    changed = 1
  end
  state, probe = 'half_open', 1
end
"""

# ARGV: successes, failures, threshold, window, cooldown. Any success closes the breaker;
# failures count in the window (closed), reopen it (half-open) or change nothing (open).
_RECORD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('GET', KEYS[1]) or 'closed'
local successes, failures = tonumber(ARGV[1]), tonumber(ARGV[2])
local threshold = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local cooldown = tonumber(ARGV[5])
local changed = 0
if successes > 0 and state ~= 'closed' then
  redis.call('SET', KEYS[1], 'closed')
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  state, changed = 'closed', 1
end
if failures == 0 then return {state, changed} end
if state == 'half_open' then
  redis.call('SET', KEYS[1], 'open')
  redis.call('SET', KEYS[2], tostring(now + cooldown))
  redis.call('DEL', KEYS[3])
  return {'open', 1}
end
if state == 'open' then return {'open', changed} end
for i = 1, failures do
  redis.call('ZADD', KEYS[4], now, tostring(now) .. ':' .. i .. ':' .. tostring(math.random()))
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', tostring(now - window))
redis.call('EXPIRE', KEYS[4], math.ceil(window) + 1)
if redis.call('ZCARD', KEYS[4]) >= threshold then
  redis.call('SET', KEYS[1], 'open')
  redis.call('SET', KEYS[2], tostring(now + cooldown))
  redis.call('DEL', KEYS[4])
  return {'open', 1}
end
return {'closed', changed}
"""


def breaker_keys(provider: str) -> list[str]:
    base = f"notify:breaker:{provider}"
    return [f"{base}:state", f"{base}:open_until", f"{base}:probe", f"{base}:failures"]


def breaker_record_many(*, provider: str, successes: int, failures: int) -> str:
    """Record the health of a round of calls at once (one round trip): as if each were
    recorded alone, successes first. Returns the state after them."""
    try:
        client = get_redis_connection("default")
        state, changed = client.register_script(_RECORD)(
            keys=breaker_keys(provider),
            args=[
                successes,
                failures,
                settings.NOTIFY_BREAKER_FAILURES,
                settings.NOTIFY_BREAKER_WINDOW,
                settings.NOTIFY_BREAKER_COOLDOWN,
            ],
        )
    except RedisError:
        logger.warning("breaker %s: Redis unavailable, outcome not recorded", provider)
        return CLOSED
    state = state.decode() if isinstance(state, bytes) else state
    if int(changed):
        logger.warning("breaker %s: now %s", provider, state)
    return state


def breaker_state(*, provider: str) -> str:
    """The breaker's state as stored (closed when never tripped)."""
    value = get_redis_connection("default").get(breaker_keys(provider)[0])
    return value.decode() if value else CLOSED
