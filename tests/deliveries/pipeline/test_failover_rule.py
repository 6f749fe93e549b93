"""The failover rule on its own (deliveries/pipeline/failover.py): which provider a
delivery goes to next, from the last answer, the providers already tried, their measured
latency and the time left before the delivery's deadline."""

from __future__ import annotations

import pytest
import requests
from urllib3.exceptions import NewConnectionError

from deliveries.channels.base import SendResult, call_failed
from deliveries.pipeline.failover import Answer, answer_kind, failover_next, provider_choose

PROVIDERS = ["postmark", "smtp"]


def next_after(answer: Answer, *, speed: bool = False, latency=None, left=None, tried=None):
    return failover_next(
        providers=PROVIDERS,
        tried=tried if tried is not None else ["postmark"],
        answer=answer,
        speed_over_duplicate=speed,
        latency=latency or {},
        deadline_left=left,
    )


def test_a_transient_refusal_moves_on_to_the_next_provider():
    assert next_after(Answer.TRANSIENT) == "smtp"


@pytest.mark.parametrize("answer", [Answer.DELIVERED, Answer.PERMANENT])
def test_a_delivery_or_a_permanent_refusal_stays(answer):
    assert next_after(answer, speed=True) is None


def test_an_unknown_outcome_moves_on_only_when_the_category_puts_speed_first():
    assert next_after(Answer.UNKNOWN, speed=False) is None
    assert next_after(Answer.UNKNOWN, speed=True) == "smtp"


def test_a_delivery_pinned_by_an_earlier_unknown_outcome_stays_even_after_a_refusal():
    pinned = dict(providers=PROVIDERS, tried=["postmark"], answer=Answer.TRANSIENT,
                  latency={}, deadline_left=None, pinned=True)  # fmt: skip
    assert failover_next(**pinned, speed_over_duplicate=False) is None
    assert failover_next(**pinned, speed_over_duplicate=True) == "smtp"


def test_no_provider_is_tried_twice_in_a_round():
    assert next_after(Answer.TRANSIENT, tried=["postmark", "smtp"]) is None


def test_nothing_moves_past_the_deadline():
    assert next_after(Answer.TRANSIENT, left=0) is None


def test_a_provider_too_slow_for_the_deadline_is_passed_over():
    slow = {"postmark": 12.0, "smtp": 0.2}
    chosen = provider_choose(providers=PROVIDERS, skip=[], latency=slow, deadline_left=5)
    assert chosen == "smtp"
    # With time enough, or no deadline, the primary keeps its place.
    assert provider_choose(providers=PROVIDERS, skip=[], latency=slow, deadline_left=60) == (
        "postmark"
    )
    assert provider_choose(providers=PROVIDERS, skip=[], latency=slow, deadline_left=None) == (
        "postmark"
    )


def test_when_every_provider_is_too_slow_the_first_is_still_tried():
    slow = {"postmark": 12.0, "smtp": 9.0}
    assert provider_choose(providers=PROVIDERS, skip=[], latency=slow, deadline_left=5) == (
        "postmark"
    )


def test_a_call_that_never_connected_is_transient_and_one_that_lost_its_answer_is_unknown():
    refused = requests.ConnectionError(NewConnectionError(None, "connection refused"))
    assert answer_kind(call_failed(refused)) is Answer.TRANSIENT
    assert answer_kind(call_failed(requests.ReadTimeout("read timed out"))) is Answer.UNKNOWN
    assert answer_kind(SendResult.transient(status_code="503")) is Answer.TRANSIENT
    assert answer_kind(SendResult.permanent(status_code="422")) is Answer.PERMANENT
