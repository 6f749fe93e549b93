"""Provider rate limits and circuit breakers, on the real Redis."""

from __future__ import annotations

import time
import uuid

import pytest

from deliveries.pipeline.pressure import Admission, provider_admissions, provider_outcomes
from deliveries.pipeline.ratelimit import provider_limit
from flow.breaker import breaker_record_many, breaker_state


@pytest.fixture
def provider(settings) -> str:
    name = f"test-{uuid.uuid4().hex[:8]}"
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {**settings.NOTIFY_PROVIDER_RATE_LIMITS, name: "1:10"}
    settings.NOTIFY_LOW_PRIORITY_RESERVE = 0.2
    return name


def test_low_priority_stops_at_the_reserve_and_high_priority_still_gets_tokens(channel):
    low = [admitted(channel, "low").allowed for _ in range(10)]
    assert low == [True] * 8 + [False] * 2  # 20 % of the bucket is kept back from campaigns
    refused = admitted(channel, "low")
    assert refused.wait_seconds > 0.5
    assert admitted(channel, "high").allowed
    assert admitted(channel, "medium").allowed
    assert not admitted(channel, "high").allowed  # now truly empty


def test_a_malformed_rate_setting_names_the_variable(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.NOTIFY_PROVIDER_RATE_LIMITS = {"smtp": "fast"}
    with pytest.raises(ImproperlyConfigured, match="NOTIFY_RATE_SMTP"):
        provider_limit("smtp")


@pytest.fixture
def breaker(settings, channel, provider) -> str:
    """The breaker of `channel`'s provider (whose bucket never runs dry here)."""
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {
        **settings.NOTIFY_PROVIDER_RATE_LIMITS,
        provider: "1000:1000",
    }
    settings.NOTIFY_BREAKER_FAILURES = 3
    settings.NOTIFY_BREAKER_WINDOW = 10
    settings.NOTIFY_BREAKER_COOLDOWN = 0.4
    settings.NOTIFY_BREAKER_PROBE_TIMEOUT = 5
    return provider


def admitted(channel: str, queue: str = "high") -> Admission:
    """One send's admission to `channel`'s provider, as a round of one."""
    [admission] = provider_admissions(sends=[(channel, queue, "a@example.com")])
    return admission


def failed(breaker: str) -> str:
    """One transient failure recorded; the breaker's state after it."""
    return breaker_record_many(provider=breaker, successes=0, failures=1)


def test_breaker_opens_after_a_burst_and_lets_one_probe_through_after_the_cooldown(
    breaker, channel
):
    assert admitted(channel).allowed
    assert [failed(breaker) for _ in range(3)] == ["closed", "closed", "open"]
    refused = admitted(channel)
    assert not refused.allowed
    assert 0 < refused.wait_seconds <= 0.4

    time.sleep(0.45)
    first, second = admitted(channel), admitted(channel)
    assert (first.allowed, first.probe) == (True, True)
    assert not second.allowed  # one probe at a time
    assert breaker_state(provider=breaker) == "half_open"

    assert breaker_record_many(provider=breaker, successes=1, failures=0) == "closed"
    assert admitted(channel).allowed


def test_a_failed_probe_opens_the_breaker_again(breaker, channel):
    for _ in range(3):
        failed(breaker)
    time.sleep(0.45)
    assert admitted(channel).probe
    assert failed(breaker) == "open"
    assert not admitted(channel).allowed


def test_failures_spread_wider_than_the_window_do_not_open_it(breaker, settings):
    settings.NOTIFY_BREAKER_WINDOW = 0.3
    for _ in range(4):
        assert failed(breaker) == "closed"
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
    high = provider_admissions(sends=[(channel, "high", t) for t in targets])
    assert [a.allowed for a in high] == [True] * 10 + [False] * 2  # the burst, in order
    assert all(0 < a.wait_seconds <= 1.0 and "rate limit" in a.why for a in high[10:])

    settings.NOTIFY_RATE_MAX_INLINE_WAIT = 2.5  # a short wait is waited out in place
    later = provider_admissions(sends=[(channel, "high", t) for t in targets[:2]])
    assert [a.allowed for a in later] == [True, True]


def test_a_round_of_low_sends_stops_at_the_reserve(channel):
    low = provider_admissions(sends=[(channel, "low", t) for t in ["a", "b"] * 5])
    assert [a.allowed for a in low] == [True] * 8 + [False] * 2


def test_an_open_breaker_refuses_a_whole_round_and_a_half_open_one_lets_one_probe(
    channel, provider, settings
):
    settings.NOTIFY_BREAKER_FAILURES = 3
    settings.NOTIFY_BREAKER_COOLDOWN = 0.4
    assert breaker_record_many(provider=provider, successes=2, failures=3) == "open"
    refused = provider_admissions(sends=[(channel, "high", t) for t in "abc"])
    assert [(a.allowed, "circuit open" in a.why) for a in refused] == [(False, True)] * 3

    time.sleep(0.45)
    probing = provider_admissions(sends=[(channel, "high", t) for t in "abc"])
    assert [(a.allowed, a.probe) for a in probing] == [(True, True), (False, False), (False, False)]
    provider_outcomes(outcomes=[(provider, "delivered")])
    assert breaker_state(provider=provider) == "closed"
    assert all(a.allowed for a in provider_admissions(sends=[(channel, "high", "a")] * 3))


def test_a_round_of_outcomes_counts_each_transient_failure_and_no_permanent_one(breaker):
    provider_outcomes(outcomes=[(breaker, "permanent")] * 5 + [(breaker, "delivered")])
    assert breaker_state(provider=breaker) == "closed"
    provider_outcomes(outcomes=[(breaker, "transient")] * 2 + [(breaker, "delivered")] * 4)
    assert breaker_state(provider=breaker) == "closed"  # two of the three it takes
    provider_outcomes(outcomes=[(breaker, "transient"), (None, "transient")])
    assert breaker_state(provider=breaker) == "open"
