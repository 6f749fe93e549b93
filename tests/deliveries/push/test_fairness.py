"""The per-recipient push slots on the real Redis."""

from __future__ import annotations

import logging
import time

from flow.fairness import (
    push_drop_record,
    push_drops_total,
    push_slot_release,
    push_slot_take,
    push_slots_held,
)


def test_a_recipient_never_holds_more_than_four_push_slots_and_a_freed_one_is_reusable():
    taken = [push_slot_take(recipient_id=9001, member=str(n)) for n in range(6)]
    assert taken == [True] * 4 + [False] * 2
    assert push_slots_held(recipient_id=9001) == 4
    # Another recipient is not affected by the first one's crowd.
    assert push_slot_take(recipient_id=9002, member="100")

    push_slot_release(recipient_id=9001, member="0")
    assert push_slot_take(recipient_id=9001, member="5")
    # Taking a slot one already holds (a re-published message) does not use another.
    assert push_slot_take(recipient_id=9001, member="5")
    assert push_slots_held(recipient_id=9001) == 4


def test_a_slot_left_by_a_crashed_worker_frees_itself(settings):
    settings.NOTIFY_SEND_CLAIM_TIMEOUT = 0.3
    for n in range(4):
        assert push_slot_take(recipient_id=9003, member=str(n))
    assert not push_slot_take(recipient_id=9003, member="99")
    time.sleep(0.4)
    assert push_slot_take(recipient_id=9003, member="99")


def test_drops_are_counted_each_but_logged_as_one_line_a_minute(caplog):
    from flow import fairness

    # A fresh minute: nothing reported yet in this window.
    fairness._redis().delete(fairness._DROPS_LOGGED_KEY, fairness._DROPS_WINDOW_KEY)
    before = push_drops_total()
    with caplog.at_level(logging.WARNING, logger="flow.fairness"):
        for _ in range(50):
            push_drop_record(channel="webpush", count=2)
    assert push_drops_total() - before == 100
    lines = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(lines) == 1
    assert "dropped 2 push jobs" in lines[0].getMessage()
