"""Admission to a provider: the circuit breaker, then the rate limit.

A send that may not go now is postponed, never dropped and never charged: its claim is
given back with `next_attempt_at` set past the wait, the attempt counter is restored,
and a countdown message (or the sweeper, for long waits) brings it back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone
from redis.exceptions import RedisError

from deliveries.breaker import breaker_permit, breaker_record
from deliveries.enqueue import delivery_enqueue
from deliveries.models import AttemptOutcome, Delivery, DeliveryStatus
from deliveries.ratelimit import provider_for_channel, provider_take


@dataclass(frozen=True)
class Admission:
    allowed: bool
    provider: str | None = None
    wait_seconds: float = 0.0
    why: str = ""
    probe: bool = False  # the breaker's half-open probe: its failure is not charged


def provider_admission(*, channel: str, queue: str) -> Admission:
    """May this send call its provider now? Waits in place only for a short token wait."""
    provider = provider_for_channel(channel)
    if provider is None:
        return Admission(True)
    permit = breaker_permit(provider=provider)
    if not permit.allowed:
        return Admission(False, provider, permit.wait_seconds, f"{provider} circuit open")
    deadline = time.monotonic() + settings.NOTIFY_RATE_MAX_INLINE_WAIT
    while True:
        try:
            take = provider_take(provider=provider, queue=queue)
        except RedisError:
            # Redis away: not sending at all would be worse than sending unmetered for a
            # while; the provider's own throttling answers are still classified.
            return Admission(True, provider, probe=permit.probe)
        if take.allowed:
            return Admission(True, provider, probe=permit.probe)
        if time.monotonic() + take.wait_seconds > deadline:
            return Admission(False, provider, take.wait_seconds, f"{provider} rate limit")
        time.sleep(take.wait_seconds)


def provider_outcome(*, provider: str | None, outcome: str) -> None:
    """Tell the breaker how the call went: only transient failures count against it."""
    if provider is not None:
        breaker_record(provider=provider, success=outcome != AttemptOutcome.TRANSIENT)


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
