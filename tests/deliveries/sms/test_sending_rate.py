"""The bind's sending rate under throttling: down by half stepwise, up stepwise, no see-saw.

A hand-driven clock stands in for time: these check the rule, not the speed.
"""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from deliveries.channels.sms.smpp.rate import AdaptiveRate, throttle_pause


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_rate(clock: Clock) -> AdaptiveRate:
    return AdaptiveRate(
        ceiling=30.0,
        floor=1.0,
        sustained_count=3,
        sustained_window=10.0,
        step_interval=5.0,
        recover_after=30.0,
        recover_step=0.1,
        clock=clock,
    )


def test_a_single_throttle_does_not_cut_the_rate():
    clock = Clock()
    rate = make_rate(clock)
    rate.throttled()
    clock.now += 20
    rate.throttled()
    assert rate.rate == 30.0


def test_sustained_throttling_halves_the_rate_one_step_at_a_time():
    clock = Clock()
    rate = make_rate(clock)
    seen = []
    for _ in range(12):  # a 0x58 every second for 12 s
        rate.throttled()
        seen.append(rate.rate)
        clock.now += 1
    # Down by half, then held for the step interval before the next half — never to zero.
    assert seen[:3] == [30.0, 30.0, 15.0]
    assert sorted(set(seen), reverse=True) == [30.0, 15.0, 7.5]
    assert min(seen) >= 1.0


def test_the_rate_climbs_back_stepwise_only_after_a_quiet_spell():
    clock = Clock()
    rate = make_rate(clock)
    for _ in range(3):
        rate.throttled()
    assert rate.rate == 15.0
    clock.now += 10
    rate.accepted()
    assert rate.rate == 15.0  # not yet: throttling was 10 s ago
    history = []
    clock.now += 25
    for _ in range(40):
        rate.accepted()
        history.append(rate.rate)
        clock.now += 1
    # +3/s (10 % of the ceiling) at most once per 5 s, up to the ceiling and no further.
    steps = [b - a for a, b in pairwise(history) if b != a]
    assert steps and all(abs(step - 3.0) < 1e-9 for step in steps)
    assert history[-1] == 30.0


def test_pacing_spaces_submits_by_the_current_rate():
    clock = Clock()
    rate = make_rate(clock)
    waits = [rate.reserve() for _ in range(4)]
    assert waits == pytest.approx([0.0, 1 / 30, 2 / 30, 3 / 30])


def test_throttle_pauses_double_from_100_ms_to_5_s_with_jitter():
    rng = random.Random(7)
    pauses = [throttle_pause(n, base=0.1, ceiling=5.0, jitter=0.2, rng=rng) for n in range(1, 10)]
    for n, pause in enumerate(pauses, start=1):
        nominal = min(5.0, 0.1 * 2 ** (n - 1))
        assert nominal * 0.8 <= pause <= min(5.0, nominal * 1.2)
    assert pauses[-1] <= 5.0
    assert len({round(p, 6) for p in pauses}) == len(pauses)  # jittered, not in lock-step
