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

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import F
from django.utils import timezone
from redis.exceptions import RedisError

from deliveries.models import AttemptOutcome, Delivery, DeliveryStatus, Device, DeviceKind
from deliveries.pipeline.breaker import breaker_permit, breaker_record
from deliveries.pipeline.enqueue import delivery_enqueue
from deliveries.pipeline.ratelimit import provider_for_channel, provider_take


@dataclass(frozen=True)
class Admission:
    allowed: bool
    provider: str | None = None
    wait_seconds: float = 0.0
    why: str = ""
    probe: bool = False  # the breaker's half-open probe: its failure is not charged
    breaker: str | None = None  # the breaker this send counts against


def breaker_for(*, provider: str, channel: str, target: str) -> str:
    """The breaker a send counts against: `webpush:<host[:port]>` per push service host
    for Web Push, the provider itself for every other channel."""
    if channel != DeviceKind.WEBPUSH or not target.isdigit():
        return provider
    endpoint = (
        Device.objects.filter(pk=int(target), kind=DeviceKind.WEBPUSH)
        .values_list("endpoint", flat=True)
        .first()
    )
    host = urlsplit(endpoint or "").netloc.lower()
    return f"{provider}:{host}" if host else provider


def provider_admission(*, channel: str, queue: str, target: str = "") -> Admission:
    """May this send call its provider now? Waits in place only for a short token wait."""
    provider = provider_for_channel(channel)
    if provider is None:
        return Admission(True)
    breaker = breaker_for(provider=provider, channel=channel, target=target)
    permit = breaker_permit(provider=breaker)
    if not permit.allowed:
        return Admission(
            False, provider, permit.wait_seconds, f"{breaker} circuit open", breaker=breaker
        )
    deadline = time.monotonic() + settings.NOTIFY_RATE_MAX_INLINE_WAIT
    while True:
        try:
            take = provider_take(provider=provider, queue=queue)
        except RedisError:
            # Redis away: not sending at all would be worse than sending unmetered for a
            # while; the provider's own throttling answers are still classified.
            return Admission(True, provider, probe=permit.probe, breaker=breaker)
        if take.allowed:
            return Admission(True, provider, probe=permit.probe, breaker=breaker)
        if time.monotonic() + take.wait_seconds > deadline:
            return Admission(
                False, provider, take.wait_seconds, f"{provider} rate limit", breaker=breaker
            )
        time.sleep(take.wait_seconds)


def provider_outcome(*, breaker: str | None, outcome: str) -> None:
    """Tell the breaker how the call went: a transient failure counts against it, a
    delivery for it; a permanent answer (one dead device, one bad message) is no news
    about the service and is not recorded at all."""
    if breaker is None or outcome == AttemptOutcome.PERMANENT:
        return
    breaker_record(provider=breaker, success=outcome == AttemptOutcome.DELIVERED)


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
