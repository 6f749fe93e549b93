"""Retry policy per channel: when the next attempt is, or why there is none."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from django.conf import settings

from notify.models import PUSH_CHANNELS


class RetryKind(Enum):
    RETRY = "retry"
    EXHAUSTED = "exhausted"  # no retries left → dead
    PAST_DEADLINE = "past_deadline"  # the next try would be too late → expired


@dataclass(frozen=True)
class RetryDecision:
    kind: RetryKind
    delay: float = 0.0
    next_attempt_at: datetime | None = None


def retry_delays_for(channel: str) -> list[float]:
    """The base delays between attempts for a channel (attempt n waits delays[n-1]).

    SMS has its own, shorter schedule; other non-push channels follow email's.
    """
    if channel == "sms":
        return list(settings.NOTIFY_SMS_RETRY_DELAYS)
    return list(settings.NOTIFY_EMAIL_RETRY_DELAYS)


def decide_claim_recovery(
    *, recoveries: int, now: datetime, deadline: datetime | None
) -> RetryKind:
    """A claim whose sender was lost mid-send, found stale after `recoveries` earlier
    recoveries: give it back for another try (RETRY), or end it.

    Past its deadline it is `expired` (PAST_DEADLINE), as any delivery past its deadline
    is, whatever its recoveries; given back NOTIFY_CLAIM_RECOVERIES_MAX times already, it
    is `dead` (EXHAUSTED): a send that keeps killing its worker is not tried forever.
    """
    if deadline is not None and now >= deadline:
        return RetryKind.PAST_DEADLINE
    if recoveries >= settings.NOTIFY_CLAIM_RECOVERIES_MAX:
        return RetryKind.EXHAUSTED
    return RetryKind.RETRY


def push_backoff(attempt: int) -> float:
    """Push base delay after failed attempt `attempt` (1-based): doubling, capped."""
    base = settings.NOTIFY_PUSH_RETRY_BASE
    ceiling = settings.NOTIFY_PUSH_RETRY_MAX
    # The exponent is bounded so a long-waiting delivery never overflows a float.
    return min(ceiling, base * 2 ** min(max(attempt - 1, 0), 64))


def route_backoff(retry: int) -> float:
    """Base delay before retry `retry` (1-based) of a route task that raised: doubling, capped."""
    base = settings.NOTIFY_ROUTE_RETRY_BASE
    return min(settings.NOTIFY_ROUTE_RETRY_MAX, base * 2 ** min(max(retry - 1, 0), 64))


def jittered(delay: float, *, jitter: float, rng: random.Random | None = None) -> float:
    """`delay` spread by ±`jitter` (a fraction), never negative.

    Computed here rather than with Celery's retry_jitter, which works in whole seconds
    and can pick 0 (an instant retry).
    """
    rng = rng or random
    return max(0.0, delay * rng.uniform(1.0 - jitter, 1.0 + jitter))


def decide_retry(
    *,
    channel: str,
    attempt: int,
    now: datetime,
    deadline: datetime | None,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> RetryDecision:
    """After failed attempt number `attempt` (1-based): retry when, or give up how.

    Push has no attempt limit: its deadline (the notification's TTL) ends it, as
    `expired`, when the next attempt would fall past it. A delivery already past its
    deadline is `expired` whatever its attempts (not `dead`: it was never tried late).
    """
    if deadline is not None and now >= deadline:
        return RetryDecision(RetryKind.PAST_DEADLINE)
    if channel in PUSH_CHANNELS:
        base = push_backoff(attempt)
    else:
        delays = retry_delays_for(channel)
        if attempt > len(delays):
            return RetryDecision(RetryKind.EXHAUSTED)
        base = delays[attempt - 1]
    delay = jittered(base, jitter=settings.NOTIFY_RETRY_JITTER, rng=rng)
    if retry_after is not None and retry_after > delay:
        # A provider's wait is believed up to a ceiling, so the date arithmetic below
        # cannot overflow (NaN never gets here); past the deadline the delivery expires.
        ceiling = settings.NOTIFY_PUSH_RETRY_AFTER_MAX
        delay = retry_after if retry_after < ceiling else ceiling
    next_attempt_at = now + timedelta(seconds=delay)
    if deadline is not None and next_attempt_at > deadline:
        return RetryDecision(RetryKind.PAST_DEADLINE, delay, next_attempt_at)
    return RetryDecision(RetryKind.RETRY, delay, next_attempt_at)
