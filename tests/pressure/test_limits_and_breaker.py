"""Provider rate limits and circuit breakers, on the real Redis."""

from __future__ import annotations

import time
import uuid

import pytest

from deliveries.pipeline.breaker import (
    breaker_permit,
    breaker_record,
    breaker_record_many,
    breaker_state,
)
from deliveries.pipeline.pressure import provider_admissions, provider_outcomes
from deliveries.pipeline.ratelimit import provider_limit, provider_take


@pytest.fixture
def provider(settings) -> str:
    name = f"test-{uuid.uuid4().hex[:8]}"
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {**settings.NOTIFY_PROVIDER_RATE_LIMITS, name: "1:10"}
    settings.NOTIFY_LOW_PRIORITY_RESERVE = 0.2
    return name


def test_low_priority_stops_at_the_reserve_and_high_priority_still_gets_tokens(provider):
    low = [provider_take(provider=provider, queue="low").allowed for _ in range(10)]
    assert low == [True] * 8 + [False] * 2  # 20 % of the bucket is kept back from campaigns
    refused = provider_take(provider=provider, queue="low")
    assert refused.wait_seconds > 0.5
    assert provider_take(provider=provider, queue="high").allowed
    assert provider_take(provider=provider, queue="medium").allowed
    assert not provider_take(provider=provider, queue="high").allowed  # now truly empty


def test_a_malformed_rate_setting_names_the_variable(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.NOTIFY_PROVIDER_RATE_LIMITS = {"smtp": "fast"}
    with pytest.raises(ImproperlyConfigured, match="NOTIFY_RATE_SMTP"):
        provider_limit("smtp")


@pytest.fixture
def breaker(settings) -> str:
    settings.NOTIFY_BREAKER_FAILURES = 3
    settings.NOTIFY_BREAKER_WINDOW = 10
    settings.NOTIFY_BREAKER_COOLDOWN = 0.4
    settings.NOTIFY_BREAKER_PROBE_TIMEOUT = 5
    return f"test-{uuid.uuid4().hex[:8]}"


def test_breaker_opens_after_a_burst_and_lets_one_probe_through_after_the_cooldown(breaker):
    assert breaker_permit(provider=breaker).allowed
    assert [breaker_record(provider=breaker, success=False) for _ in range(3)] == [
        "closed",
        "closed",
        "open",
    ]
    refused = breaker_permit(provider=breaker)
    assert not refused.allowed
    assert 0 < refused.wait_seconds <= 0.4

    time.sleep(0.45)
    first, second = breaker_permit(provider=breaker), breaker_permit(provider=breaker)
    assert (first.allowed, first.probe) == (True, True)
    assert not second.allowed  # one probe at a time
    assert breaker_state(provider=breaker) == "half_open"

    assert breaker_record(provider=breaker, success=True) == "closed"
    assert breaker_permit(provider=breaker).allowed


def test_a_failed_probe_opens_the_breaker_again(breaker):
    for _ in range(3):
        breaker_record(provider=breaker, success=False)
    time.sleep(0.45)
    assert breaker_permit(provider=breaker).probe
    assert breaker_record(provider=breaker, success=False) == "open"
    assert not breaker_permit(provider=breaker).allowed


def test_failures_spread_wider_than_the_window_do_not_open_it(breaker, settings):
    settings.NOTIFY_BREAKER_WINDOW = 0.3
    for _ in range(4):
        assert breaker_record(provider=breaker, success=False) == "closed"
        time.sleep(0.16)
    assert breaker_state(provider=breaker) == "closed"


@pytest.fixture
def channel(settings, provider) -> str:
    """A channel whose sends count against `provider` (bucket 1/s, burst 10)."""
    settings.NOTIFY_CHANNEL_PROVIDERS = {**settings.NOTIFY_CHANNEL_PROVIDERS, "email": provider}
    settings.NOTIFY_RATE_MAX_INLINE_WAIT = 0.0
    return "email"


def test_a_round_takes_the_tokens_there_are_and_the_rest_are_told_to_wait(channel, settings):
    targets = [f"p{n}@example.com" for n in range(12)]
    high = provider_admissions(channel=channel, queue="high", targets=targets)
    assert [a.allowed for a in high] == [True] * 10 + [False] * 2  # the burst, in order
    assert all(0 < a.wait_seconds <= 1.0 and "rate limit" in a.why for a in high[10:])

    settings.NOTIFY_RATE_MAX_INLINE_WAIT = 2.5  # a short wait is waited out in place
    later = provider_admissions(channel=channel, queue="high", targets=targets[:2])
    assert [a.allowed for a in later] == [True, True]


def test_a_round_of_low_sends_stops_at_the_reserve(channel):
    low = provider_admissions(channel=channel, queue="low", targets=["a", "b"] * 5)
    assert [a.allowed for a in low] == [True] * 8 + [False] * 2


def test_an_open_breaker_refuses_a_whole_round_and_a_half_open_one_lets_one_probe(
    channel, provider, settings
):
    settings.NOTIFY_BREAKER_FAILURES = 3
    settings.NOTIFY_BREAKER_COOLDOWN = 0.4
    assert breaker_record_many(provider=provider, successes=2, failures=3) == "open"
    refused = provider_admissions(channel=channel, queue="high", targets=["a", "b", "c"])
    assert [(a.allowed, "circuit open" in a.why) for a in refused] == [(False, True)] * 3

    time.sleep(0.45)
    probing = provider_admissions(channel=channel, queue="high", targets=["a", "b", "c"])
    assert [(a.allowed, a.probe) for a in probing] == [(True, True), (False, False), (False, False)]
    provider_outcomes(outcomes=[(provider, "delivered")])
    assert breaker_state(provider=provider) == "closed"
    assert all(
        a.allowed for a in provider_admissions(channel=channel, queue="high", targets=["a"] * 3)
    )


def test_a_round_of_outcomes_counts_each_transient_failure_and_no_permanent_one(breaker):
    provider_outcomes(outcomes=[(breaker, "permanent")] * 5 + [(breaker, "delivered")])
    assert breaker_state(provider=breaker) == "closed"
    provider_outcomes(outcomes=[(breaker, "transient")] * 2 + [(breaker, "delivered")] * 4)
    assert breaker_state(provider=breaker) == "closed"  # two of the three it takes
    provider_outcomes(outcomes=[(breaker, "transient"), (None, "transient")])
    assert breaker_state(provider=breaker) == "open"
