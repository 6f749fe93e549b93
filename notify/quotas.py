"""Quotas in events, per producer, shared by all its API keys.

Three quotas, each a Producer field, else its setting's default, else none:
- events per minute: a token bucket (rate N/60 per second, burst N) keyed by producer;
- events per day: a counter per UTC day;
- campaign recipients per day: a counter per UTC day of its own, charged at launch.

A request is charged in one Redis round trip whatever its size (one Lua script that
reads Redis's clock, takes from the bucket and counts the day), and not at all when no
quota applies to the producer. Events are taken partially, in order: a batch of 150 with
100 left gets exactly 100. A campaign's audience is taken whole or not at all.

The day counter of events is kept whenever an events quota applies (per minute or per
day), so admin can show a producer's use today; the campaign counter whenever the
campaign quota applies.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import NoScriptError, RedisError

from notify.models import Producer
from notify.ratelimit import BUCKET_TAKE_LUA, bucket_key

logger = logging.getLogger(__name__)

MINUTE = 60  # seconds: the window the per-minute quota refills over
DAY = 86_400  # seconds: a UTC day, the window of the daily quotas

# Which quota refused (the Producer field's name, as in admin and create_producer).
EVENTS_PER_MINUTE = "events_per_minute"
EVENTS_PER_DAY = "events_per_day"
CAMPAIGN_EVENTS_PER_DAY = "campaign_events_per_day"

# KEYS[1]: the minute bucket, KEYS[2]: the day counter ("<UTC day number>:<count>", so a
# new day starts from 0 without a key per day). ARGV: per minute (-1: none), per day (-1:
# none), how many are asked, partial (1: as many as there are, in order; 0: all or none).
# Returns {granted, seconds until the next one could be granted, tokens left in the
# minute bucket (-1: none), the day's count after this take, seconds to UTC midnight,
# the quota that refused ('' when all were granted)}.
_CHARGE = (
    """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local per_minute, per_day = tonumber(ARGV[1]), tonumber(ARGV[2])
local asked, partial_take = tonumber(ARGV[3]), ARGV[4] == '1'
local today = math.floor(now / 86400)
local to_midnight = (today + 1) * 86400 - now

local used = 0
local held_day = redis.call('GET', KEYS[2])
if held_day then
  local day, count = string.match(held_day, '^(%d+):(%d+)$')
  if tonumber(day) == today then used = tonumber(count) end
end
local want = asked
if per_day >= 0 and per_day - used < want then
  if partial_take then want = math.max(0, per_day - used) else want = 0 end
end

local function take(bucket, rate, burst, want, ttl, floor, partial)
"""
    + BUCKET_TAKE_LUA
    + """
  return granted, tokens, wait
end

local granted, minute_left, wait = want, -1, 0
if per_minute >= 0 then
  granted, minute_left, wait = take(KEYS[1], per_minute / 60, per_minute, want, 61, 0,
                                    partial_take)
  if wait > 60 then wait = 60 end  -- a quota of 0 never refills: retry in a window
end
used = used + granted
if granted > 0 then
  redis.call('SET', KEYS[2], string.format('%d:%d', today, used), 'EX',
             math.ceil(to_midnight) + 60)
end

local refused_by = ''
if granted < asked then
  if per_day >= 0 and (used >= per_day or granted == want) then
    refused_by = 'day'
    wait = to_midnight
  else
    refused_by = 'minute'
  end
end
return {granted, tostring(wait), tostring(minute_left), used, tostring(to_midnight),
        refused_by}
"""
)

# KEYS: day counters. Returns each one's count for today (0 when absent or of another day).
_READ_DAYS = """
local now_parts = redis.call('TIME')
local today = math.floor(tonumber(now_parts[1]) / 86400)
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = 0
  local held = redis.call('GET', key)
  if held then
    local day, count = string.match(held, '^(%d+):(%d+)$')
    if tonumber(day) == today then counts[i] = tonumber(count) end
  end
end
return counts
"""

_SHAS = {script: hashlib.sha1(script.encode()).hexdigest() for script in (_CHARGE, _READ_DAYS)}


class QuotasUnavailable(Exception):
    """Redis, which holds the quotas' counts, is down and NOTIFY_API_RATE_LIMIT_FAIL_OPEN
    is off: the request is refused rather than let through uncounted."""


@dataclass(frozen=True)
class ProducerQuotas:
    """The quotas that apply to a producer (None: no quota)."""

    events_per_minute: int | None
    events_per_day: int | None
    campaign_events_per_day: int | None

    @property
    def meters_events(self) -> bool:
        """True when an events quota applies, so intake charges Redis for them."""
        return self.events_per_minute is not None or self.events_per_day is not None


def producer_quotas(producer: Producer) -> ProducerQuotas:
    """The producer's own quota where it has one, else the setting's default
    (NOTIFY_PRODUCER_EVENTS_PER_MINUTE, …), else none."""

    def own_or_default(field: str) -> int | None:
        own = getattr(producer, field)
        return own if own is not None else getattr(settings, f"NOTIFY_PRODUCER_{field.upper()}")

    return ProducerQuotas(
        events_per_minute=own_or_default(EVENTS_PER_MINUTE),
        events_per_day=own_or_default(EVENTS_PER_DAY),
        campaign_events_per_day=own_or_default(CAMPAIGN_EVENTS_PER_DAY),
    )


@dataclass(frozen=True)
class QuotaState:
    """One quota after a charge: its limit, its window, what is left and when it is whole
    again (seconds), for the RateLimit response headers."""

    quota: str  # EVENTS_PER_MINUTE, …
    limit: int
    window: int
    remaining: int
    reset: int


@dataclass(frozen=True)
class Charge:
    """What a charge granted: the first `granted` of `asked`, in order. When some were
    refused, `refused_by` names the quota and `retry_after` says when (seconds) the next
    one could be granted."""

    asked: int
    granted: int
    refused_by: str | None
    retry_after: int
    states: tuple[QuotaState, ...]
    limit: int | None = None  # the refusing quota's limit, for its message

    @property
    def refused(self) -> int:
        return self.asked - self.granted


def minute_bucket_key(producer_id: int) -> str:
    """The Redis key of a producer's per-minute token bucket."""
    return bucket_key("producer", producer_id)


def events_day_key(producer_id: int) -> str:
    """The Redis key of a producer's count of events today (UTC)."""
    return f"notify:quota:events-day:{producer_id}"


def campaign_day_key(producer_id: int) -> str:
    """The Redis key of a producer's count of campaign recipients launched today (UTC)."""
    return f"notify:quota:campaign-day:{producer_id}"


def events_charge(*, producer: Producer, count: int) -> Charge | None:
    """Charge `count` events to the producer's events quotas, taking as many as fit, in
    order (the caller accepts the first `granted`). None, without asking Redis, when no
    events quota applies or `count` is 0; None too when Redis is down and
    NOTIFY_API_RATE_LIMIT_FAIL_OPEN lets events through uncounted, as the request rate
    limit does. Raises QuotasUnavailable when it is down and the limiter fails closed.
    """
    quotas = producer_quotas(producer)
    if not quotas.meters_events or count <= 0:
        return None
    return _charge(
        keys=(minute_bucket_key(producer.pk), events_day_key(producer.pk)),
        per_minute=quotas.events_per_minute,
        per_day=quotas.events_per_day,
        day_quota=EVENTS_PER_DAY,
        count=count,
        partial=True,
    )


def campaign_charge(*, producer: Producer, count_audience: Callable[[], int]) -> Charge | None:
    """Charge a campaign launch's audience (`count_audience()`, called only when the quota
    applies) to the producer's daily campaign quota: all of it, or nothing when it does
    not fit what is left today. None as `events_charge` (no campaign quota, or Redis
    down and failing open); raises QuotasUnavailable."""
    per_day = producer_quotas(producer).campaign_events_per_day
    if per_day is None:
        return None
    audience_size = count_audience()
    return _charge(
        # No minute bucket for campaigns: the first key is named but never touched.
        keys=(minute_bucket_key(producer.pk), campaign_day_key(producer.pk)),
        per_minute=None,
        per_day=per_day,
        day_quota=CAMPAIGN_EVENTS_PER_DAY,
        count=audience_size,
        partial=False,
    )


def _charge(
    *,
    keys: tuple[str, str],
    per_minute: int | None,
    per_day: int | None,
    day_quota: str,
    count: int,
    partial: bool,
) -> Charge | None:
    args = (
        -1 if per_minute is None else per_minute,
        -1 if per_day is None else per_day,
        count,
        1 if partial else 0,
    )
    try:
        granted, wait, minute_left, used, to_midnight, refused_by = _run(_CHARGE, keys, args)
    except RedisError:
        if settings.NOTIFY_API_RATE_LIMIT_FAIL_OPEN:
            logger.warning("producer quotas skipped: Redis unavailable")
            return None
        raise QuotasUnavailable() from None
    states = []
    if per_minute is not None:
        left = float(minute_left)
        states.append(
            QuotaState(
                EVENTS_PER_MINUTE,
                per_minute,
                MINUTE,
                remaining=math.floor(left),
                reset=_minute_refill_seconds(per_minute, left),
            )
        )
    if per_day is not None:
        states.append(
            QuotaState(
                day_quota,
                per_day,
                DAY,
                remaining=max(0, per_day - int(used)),
                reset=math.ceil(float(to_midnight)),
            )
        )
    refused = {b"minute": EVENTS_PER_MINUTE, b"day": day_quota}.get(refused_by)
    limits = {EVENTS_PER_MINUTE: per_minute, day_quota: per_day}
    return Charge(
        asked=count,
        granted=int(granted),
        refused_by=refused,
        retry_after=max(1, math.ceil(float(wait))) if refused else 0,
        states=tuple(states),
        limit=limits.get(refused) if refused else None,
    )


def _minute_refill_seconds(per_minute: int, left: float) -> int:
    """Seconds until the minute bucket is full again (a quota of 0: a whole window)."""
    if per_minute <= 0:
        return MINUTE
    return math.ceil((per_minute - left) * MINUTE / per_minute)


@dataclass(frozen=True)
class UseToday:
    """A producer's use of its daily quotas so far today (UTC)."""

    events: int
    campaign_recipients: int


def producers_use_today(producer_ids: Iterable[int]) -> dict[int, UseToday]:
    """Each producer's events and campaign recipients charged today, in one round trip.
    Raises redis errors to the caller (admin shows "unavailable")."""
    ids = list(producer_ids)
    if not ids:
        return {}
    keys = [key for pk in ids for key in (events_day_key(pk), campaign_day_key(pk))]
    counts = _run(_READ_DAYS, keys, ())
    return {
        pk: UseToday(events=int(counts[2 * i]), campaign_recipients=int(counts[2 * i + 1]))
        for i, pk in enumerate(ids)
    }


def _run(script: str, keys: Sequence[str], args: Sequence[object]) -> list:
    """Run a script by its hash (EVAL once on a new or flushed Redis, which caches it)."""
    client = get_redis_connection("default")
    try:
        return client.evalsha(_SHAS[script], len(keys), *keys, *args)
    except NoScriptError:
        return client.eval(script, len(keys), *keys, *args)
