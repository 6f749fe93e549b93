"""Admission to a provider: the circuit breaker, then the rate limit.

Web Push has one breaker per push service host (an endpoint's host came from a browser:
ten hostile endpoints on one host must not stop pushes to every other service); the
other channels have one per provider. Only service-wide failures count against a
breaker: transient answers (5xx, 429, timeouts, connection errors). A permanent answer
is about one message or one device and never touches it.

A send that may not go now is postponed, never dropped and never charged: its claim is
given back with `next_attempt_at` set past the wait, the attempt counter is restored,
and a countdown message (or the sweeper, for long waits) brings it back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from deliveries.models import AttemptOutcome, Delivery, DeliveryStatus, DeviceKind
from deliveries.pipeline.enqueue import delivery_enqueue
from deliveries.pipeline.ratelimit import (
    provider_bucket_key,
    provider_for_channel,
    provider_limit,
)
from flow.breaker import (
    BREAKER_ENTRY_LUA,
    breaker_keys,
    breaker_record_many,
)
from notify.ratelimit import BUCKET_TAKE_LUA
from pgarrays import array_literal, planned_once

logger = logging.getLogger(__name__)

# A round's admission in one round trip: the breaker's entry check, then up to `want`
# tokens from the provider's bucket (one when this caller holds the half-open probe).
# KEYS: the breaker's state, open_until and probe lock, then the bucket. ARGV: probe lock
# ms, rate, burst, want, ttl, floor. Returns {granted, wait, state, probe, changed, why}.
_ADMIT = (
    BREAKER_ENTRY_LUA
    + """
local bucket = KEYS[4]
local rate, burst, want = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl, floor, partial = tonumber(ARGV[5]), tonumber(ARGV[6]), true
if probe == 1 then want = 1 end
"""
    + BUCKET_TAKE_LUA
    + """
local why = ''
if granted < want then why = 'rate' end
return {granted, tostring(wait), state, probe, changed, why}
"""
)


@dataclass(frozen=True)
class Admission:
    allowed: bool
    provider: str | None = None
    wait_seconds: float = 0.0
    why: str = ""
    probe: bool = False  # the breaker's half-open probe: its failure is not charged
    breaker: str | None = None  # the breaker this send counts against
    circuit_open: bool = False  # refused by an open breaker: a failover may go elsewhere


# Written once rather than built by the ORM each round (see notify/rows.py).
_PUSH_HOSTS_SQL = planned_once(
    f"""
    SELECT id, endpoint FROM deliveries_device
     WHERE id = ANY(%(ids)s::bigint[]) AND kind = '{DeviceKind.WEBPUSH.value}'
"""
)


def push_hosts(targets: Iterable[str]) -> dict[str, str]:
    """The push service's host[:port] of each Web Push device among `targets` (device
    ids), in one statement whatever their number."""
    ids = {int(target) for target in targets if target.isdigit()}
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_PUSH_HOSTS_SQL, {"ids": array_literal(ids)})
        rows = cursor.fetchall()
    return {str(pk): urlsplit(endpoint or "").netloc.lower() for pk, endpoint in rows}


def breaker_for(*, provider: str, channel: str, target: str, hosts: Mapping[str, str]) -> str:
    """The breaker a send counts against: `webpush:<host[:port]>` per push service host
    for Web Push (`hosts`: from `push_hosts`), the provider itself for every other
    channel."""
    host = hosts.get(target, "") if channel == DeviceKind.WEBPUSH else ""
    return f"{provider}:{host}" if host else provider


def provider_admissions(
    *,
    sends: Sequence[tuple[str, str, str]],
    candidates: Sequence[Sequence[str]] | None = None,
) -> list[Admission]:
    """May these sends (a round's, as (channel, queue, target)) call their provider now?
    One answer per send, in order, in one Redis round trip per breaker and queue
    whatever their number: an open breaker refuses them all; a half-open one lets the
    first through, as its probe; the others take the tokens there are, wait in place for
    a short token wait, and are refused what is still missing after it. A channel with
    no provider (in-app) is always admitted.

    `candidates`: per send, the providers of a channel that fails over, in order (empty:
    the channel's one provider). A send refused by an open breaker is asked for at the
    next one (a round trip more, only then)."""
    if candidates is None or not any(candidates):
        return _admissions(sends, [None] * len(sends))
    answers = _admissions(sends, [c[0] if c else None for c in candidates])
    step = 1
    while True:
        again = [
            i
            for i, answer in enumerate(answers)
            if answer.circuit_open and len(candidates[i]) > step
        ]
        if not again:
            return answers
        retried = _admissions([sends[i] for i in again], [candidates[i][step] for i in again])
        for index, answer in zip(again, retried, strict=True):
            answers[index] = answer
        step += 1


def _admissions(
    sends: Sequence[tuple[str, str, str]], providers: Sequence[str | None]
) -> list[Admission]:
    """`provider_admissions` at one provider per send (None: the channel's own)."""
    answers: list[Admission | None] = [None] * len(sends)
    groups: dict[tuple[str, str, str], list[int]] = {}
    hosts = push_hosts(target for channel, _, target in sends if channel == DeviceKind.WEBPUSH)
    for index, (channel, queue, target) in enumerate(sends):
        provider = providers[index] or provider_for_channel(channel)
        if provider is None:
            answers[index] = Admission(True)
            continue
        breaker = breaker_for(provider=provider, channel=channel, target=target, hosts=hosts)
        groups.setdefault((provider, breaker, queue), []).append(index)
    for (provider, breaker, queue), indexes in groups.items():
        granted = _breaker_round_admit(provider=provider, breaker=breaker, queue=queue,
                                       count=len(indexes))  # fmt: skip
        for index, admission in zip(indexes, granted, strict=True):
            answers[index] = admission
    return [answer for answer in answers if answer is not None]


def _breaker_round_admit(*, provider: str, breaker: str, queue: str, count: int) -> list[Admission]:
    """`count` sends' admissions against one breaker and the provider's bucket."""
    rate, burst = provider_limit(provider)
    floor = burst * settings.NOTIFY_LOW_PRIORITY_RESERVE if queue == "low" else 0.0
    keys = [*breaker_keys(breaker)[:3], provider_bucket_key(provider)]
    probe_ms = int(settings.NOTIFY_BREAKER_PROBE_TIMEOUT * 1000)
    ttl = max(1, int(burst / rate) + 1)
    deadline = time.monotonic() + settings.NOTIFY_RATE_MAX_INLINE_WAIT
    answers: list[Admission] = []
    while len(answers) < count:
        left = count - len(answers)
        try:
            client = get_redis_connection("default")
            granted, wait, _state, probe, changed, why = client.register_script(_ADMIT)(
                keys=keys, args=[probe_ms, rate, burst, left, ttl, floor]
            )
        except RedisError:
            # Redis away: not sending at all would be worse than sending unmetered for a
            # while; the provider's own answers are still classified.
            logger.warning("breaker %s: Redis unavailable, letting the sends through", breaker)
            return answers + [Admission(True, provider, breaker=breaker)] * left
        granted, wait, probe = int(granted), float(wait), bool(int(probe))
        why = why.decode() if isinstance(why, bytes) else why
        if int(changed):
            logger.warning("breaker %s: open → half_open, one probe goes through", breaker)
        if why == "breaker":
            refused = Admission(
                False, provider, wait, f"{breaker} circuit open", breaker=breaker, circuit_open=True
            )
            return answers + [refused] * left
        answers += [Admission(True, provider, probe=probe, breaker=breaker)] * granted
        if probe:  # the probe is the only send while the breaker is half-open
            if not granted:
                answers.append(_rate_refused(provider, breaker, wait))
            refused = Admission(
                False,
                provider,
                settings.NOTIFY_BREAKER_PROBE_TIMEOUT,
                f"{breaker} circuit open",
                breaker=breaker,
                circuit_open=True,
            )
            return answers + [refused] * (count - len(answers))
        if len(answers) < count:
            # Each send may wait in place up to the inline wait for its own token, as
            # one sent alone would: the clock starts again with each token taken.
            if granted:
                deadline = time.monotonic() + settings.NOTIFY_RATE_MAX_INLINE_WAIT
            if time.monotonic() + wait > deadline:
                return answers + [_rate_refused(provider, breaker, wait)] * (count - len(answers))
            time.sleep(wait)
    return answers


def _rate_refused(provider: str, breaker: str, wait: float) -> Admission:
    return Admission(False, provider, wait, f"{provider} rate limit", breaker=breaker)


def provider_outcomes(*, outcomes: Sequence[tuple[str | None, str]]) -> None:
    """Tell the breakers how a round's calls went, (breaker, outcome) each, in one record
    per breaker: a transient failure counts against it, a delivery for it; a permanent
    answer (one dead device, one bad message) is no news about the service."""
    tally: dict[str, list[int]] = {}
    for breaker, outcome in outcomes:
        if breaker is None or outcome == AttemptOutcome.PERMANENT:
            continue
        counts = tally.setdefault(breaker, [0, 0])
        counts[0 if outcome == AttemptOutcome.DELIVERED else 1] += 1
    for breaker, (successes, failures) in tally.items():
        breaker_record_many(provider=breaker, successes=successes, failures=failures)


def delivery_postpone(
    *, delivery: Delivery, claimed_at: datetime, wait_seconds: float, why: str
) -> bool:
    """Give the claim back without charging an attempt; due again after `wait_seconds`."""
    now = timezone.now()
    due = now + timedelta(seconds=wait_seconds)
    released = Delivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.SENDING, claimed_at=claimed_at
    ).update(
        status=DeliveryStatus.RETRYING,
        attempts=F("attempts") - 1,
        next_attempt_at=due,
        claimed_at=None,
        enqueued_at=None,
        last_error=f"postponed: {why}",
        updated_at=now,
    )
    if released and wait_seconds <= settings.NOTIFY_RETRY_COUNTDOWN_MAX:
        delivery_enqueue(
            delivery_id=delivery.pk,
            channel=delivery.channel,
            queue=delivery.queue,
            countdown=wait_seconds,
            retry=True,
        )
    return bool(released)
