"""Each channel's share of a worker's sender threads, and the line where a send waits for
one of them (plain functions, in process, on real threads)."""

from __future__ import annotations

import threading
import time

import pytest

from flow.pace import channel_call_begin, channel_call_timed, channel_slow
from flow.senders import (
    channel_lines_close,
    channel_sender_serve,
    channel_sender_take,
    channel_sender_turn,
    channel_waiting_count,
)
from tests.flow.process_state import channel_senders_reset


@pytest.fixture
def senders(settings):
    settings.NOTIFY_WORKER_THREADS = 8
    settings.NOTIFY_CHANNEL_ISOLATED_QUEUES = ["high", "medium"]
    settings.NOTIFY_CHANNEL_SENDERS = {"email": 4, "sms": 4, "webpush": 8, "fcm": 8}
    settings.NOTIFY_CHANNEL_SLOW_SECONDS = 3.0
    settings.NOTIFY_CHANNEL_SLOW_SENDERS = 2
    settings.NOTIFY_CHANNEL_WAIT_MAX = 60.0
    settings.NOTIFY_CHANNEL_WAITING_MAX = 200
    settings.NOTIFY_CHANNEL_SERVE_MAX = 120.0
    settings.NOTIFY_CHANNEL_DEFER = 1.0
    settings.NOTIFY_CHANNEL_DEFER_MAX = 300.0
    channel_senders_reset()
    yield settings
    channel_senders_reset()


class Senders:
    """`count` threads each take their turn for a send of `channel` in `queue` and, with a
    slot, keep it until released; then serve the line as the send task does."""

    def __init__(self, channel: str, queue: str, count: int) -> None:
        self.channel, self.queue = channel, queue
        self.turns: list = []
        self.ran: list = []  # waiting sends run by these senders, in order
        self.handed_back: list = []
        self.release = threading.Event()
        self.threads = []
        ready = threading.Barrier(count + 1)
        for number in range(count):
            thread = threading.Thread(target=self._sender, args=(number, ready), daemon=True)
            thread.start()
            self.threads.append(thread)
        ready.wait()

    def _sender(self, number: int, ready: threading.Barrier) -> None:
        turn = channel_sender_turn(channel=self.channel, queue=self.queue, work=f"own-{number}")
        self.turns.append(turn)
        ready.wait()
        if not turn.taken:
            return
        started = time.monotonic()
        self.release.wait()
        channel_sender_serve(
            channel=self.channel,
            queue=self.queue,
            started=started,
            run=self.ran.append,
            hand_back=self.handed_back.append,
        )

    @property
    def taken(self) -> int:
        return sum(turn.taken for turn in self.turns)

    def done(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(timeout=5)


def test_one_channel_takes_at_most_its_share_and_the_others_keep_theirs(senders):
    emails = Senders("email", "high", 4)
    try:
        assert emails.taken == 4
        assert channel_sender_turn(channel="email", queue="high", work=1).waiting
        assert channel_sender_turn(channel="sms", queue="high", work=2).taken  # its own share
        assert channel_sender_turn(channel="email", queue="medium", work=3).taken  # own class
    finally:
        emails.done()


def test_no_channel_takes_more_than_half_the_threads_of_an_isolated_class(senders):
    pushes = Senders("webpush", "high", 8)  # its setting says 8, the pool has 8
    try:
        assert pushes.taken == 4
    finally:
        pushes.done()


def test_on_the_campaign_class_a_fast_channel_may_use_every_thread(senders):
    emails = Senders("email", "low", 8)
    try:
        assert emails.taken == 8
    finally:
        emails.done()


def test_on_the_campaign_class_a_slow_channel_still_has_only_its_slow_senders(senders):
    channel_call_timed(channel="email", seconds=20.0)
    emails = Senders("email", "low", 4)
    try:
        assert emails.taken == 2
    finally:
        emails.done()


def test_a_send_without_a_slot_waits_and_the_next_sender_to_finish_runs_it(senders):
    emails = Senders("email", "high", 4)
    for number in range(3):
        turn = channel_sender_turn(channel="email", queue="high", work=f"waiting-{number}")
        assert turn.waiting and not turn.taken and turn.defer is None
    assert channel_waiting_count(channel="email", queue="high") == 3
    emails.done()
    # Each waiting send ran once, oldest first, by the senders already there; none went
    # back to the broker, and every slot is free again.
    assert sorted(emails.ran) == ["waiting-0", "waiting-1", "waiting-2"]
    assert emails.handed_back == []
    assert channel_waiting_count(channel="email", queue="high") == 0
    again = Senders("email", "high", 4)
    try:
        assert again.taken == 4
    finally:
        again.done()


def test_the_line_of_a_slow_provider_holds_only_what_it_sends_within_the_wait_bound(senders):
    channel_call_timed(channel="email", seconds=20.0)  # a relay answering after 20 s
    assert channel_slow(channel="email")
    assert not channel_slow(channel="sms")
    emails = Senders("email", "high", 3)
    try:
        assert emails.taken == 2  # slow: NOTIFY_CHANNEL_SLOW_SENDERS
        assert channel_waiting_count(channel="email", queue="high") == 1
        # Two at a time, 20 s each: six waiting sends are through within 60 s, a seventh
        # is not.
        turns = [channel_sender_turn(channel="email", queue="high", work=n) for n in range(6)]
        assert [turn.waiting for turn in turns] == [True] * 5 + [False]
        # It comes back after about its wait; the next ones behind it, a call's time
        # apart per sender, so a backlog returns spread out, not all at once.
        assert turns[5].defer == 70.0
        later = [channel_sender_turn(channel="email", queue="high", work=n) for n in (7, 8)]
        assert [turn.defer for turn in later] == [80.0, 90.0]
        senders.NOTIFY_CHANNEL_DEFER_MAX = 85.0  # and never past NOTIFY_CHANNEL_DEFER_MAX
        assert channel_sender_turn(channel="email", queue="high", work=9).defer == 85.0
        assert channel_sender_turn(channel="sms", queue="high", work=10).taken
    finally:
        emails.done()


def test_a_fast_channel_waits_for_a_sender_rather_than_a_countdown(senders):
    senders.NOTIFY_CHANNEL_WAITING_MAX = 3
    sms = Senders("sms", "high", 4)
    try:
        turns = [channel_sender_turn(channel="sms", queue="high", work=n) for n in range(4)]
        assert [turn.waiting for turn in turns] == [True, True, True, False]
        assert turns[3].defer == 1.0  # a full line: NOTIFY_CHANNEL_DEFER
    finally:
        sms.done()
    assert sorted(sms.ran) == [0, 1, 2]


def test_a_send_that_waited_too_long_goes_back_to_the_broker(senders):
    senders.NOTIFY_CHANNEL_WAIT_MAX = 0.2
    emails = Senders("email", "high", 4)
    assert channel_sender_turn(channel="email", queue="high", work="old").waiting
    time.sleep(0.3)
    assert channel_sender_turn(channel="email", queue="high", work="new").waiting
    emails.done()
    assert emails.handed_back == ["old"]
    assert emails.ran == ["new"]


def test_the_last_sender_to_stop_serving_hands_the_line_back(senders):
    senders.NOTIFY_CHANNEL_SERVE_MAX = 1.0
    emails = Senders("email", "high", 4)
    for number in range(3):
        channel_sender_turn(channel="email", queue="high", work=number)
    time.sleep(1.1)  # every sender has held its slot longer than it may serve
    emails.done()
    assert emails.ran == []
    assert sorted(emails.handed_back) == [0, 1, 2]
    assert channel_waiting_count(channel="email", queue="high") == 0


def test_a_waiting_send_that_raises_does_not_stop_the_line(senders):
    others = Senders("email", "high", 3)
    try:
        assert channel_sender_turn(channel="email", queue="high", work="mine").taken
        channel_sender_turn(channel="email", queue="high", work="bad")
        channel_sender_turn(channel="email", queue="high", work="good")
        ran: list = []

        def run(work) -> None:
            if work == "bad":
                raise RuntimeError("the database went away")
            ran.append(work)

        channel_sender_serve(
            channel="email", queue="high", started=time.monotonic(), run=run, hand_back=print
        )
        assert ran == ["good"]
        assert channel_waiting_count(channel="email", queue="high") == 0
    finally:
        others.done()


def test_a_provider_fast_again_gets_its_share_back(senders):
    channel_call_timed(channel="email", seconds=20.0)
    for _ in range(12):
        channel_call_timed(channel="email", seconds=0.05)
    assert not channel_slow(channel="email")
    emails = Senders("email", "high", 4)
    try:
        assert emails.taken == 4
    finally:
        emails.done()


def test_a_worker_shutting_down_hands_its_lines_back_and_lets_none_join(senders):
    emails = Senders("email", "high", 4)
    channel_sender_turn(channel="email", queue="high", work="waiting")
    channel_lines_close()
    turn = channel_sender_turn(channel="email", queue="high", work="late")
    assert not turn.taken and not turn.waiting and turn.defer is None  # back, at once
    emails.done()
    assert emails.ran == []
    assert emails.handed_back == ["waiting"]


def test_a_sender_busy_with_its_database_work_does_not_make_the_channel_slow(senders):
    senders.NOTIFY_CHANNEL_SLOW_SECONDS = 0.2
    channel_call_timed(channel="email", seconds=0.003)  # an SMTP peer answering in 3 ms
    emails = Senders("email", "high", 4)
    try:
        time.sleep(0.3)  # the slots are held this long, loading and claiming, no call
        assert not channel_slow(channel="email")
        # A provider call running longer than the bound still does.
        channel_call_begin(channel="email")
        time.sleep(0.3)
        assert channel_slow(channel="email")
    finally:
        channel_call_timed(channel="email", seconds=0.3)
        emails.done()


def _a_send_held_its_slot(seconds: float, deliveries: int) -> None:
    """A send of `deliveries` took a slot of email on `high` and held it `seconds`."""
    assert channel_sender_turn(channel="email", queue="high", work=list(range(deliveries))).taken
    started = time.monotonic()
    time.sleep(seconds)
    channel_sender_serve(channel="email", queue="high", started=started, run=print, hand_back=print)


def test_a_fast_channel_lines_up_what_its_senders_really_drain_in_the_wait_bound(senders):
    senders.NOTIFY_CHANNEL_WAIT_MAX = 2.0
    channel_call_timed(channel="email", seconds=0.003)  # the provider answers in 3 ms
    _a_send_held_its_slot(0.5, 1)  # but a send holds its slot 0.5 s (database work)
    emails = Senders("email", "high", 4)
    try:
        # Four at a time, 0.5 s each: 15 waiting sends and the one joining are through in
        # 2 s, not the 2,000 the provider's 3 ms would allow (and NOTIFY_CHANNEL_WAITING_MAX).
        turns = [channel_sender_turn(channel="email", queue="high", work=n) for n in range(16)]
        assert [turn.waiting for turn in turns] == [True] * 15 + [False]
    finally:
        emails.done()


def test_a_batch_in_flight_counts_per_message_before_any_send_is_done(senders):
    """FCM sends 25 in one call: before the first answer, a line counts what each of
    those deliveries takes, not the whole call once per delivery (which deferred the
    next batches by a whole order bound at a drain's start)."""
    senders.NOTIFY_CHANNEL_WAIT_MAX = 2.0
    pushes = Senders("fcm", "medium", 4)  # every slot taken, no send done yet
    try:
        channel_call_begin(channel="fcm", count=25)  # a multicast of 25 in flight
        time.sleep(0.5)
        # (25 + 25) / 4 x 0.5 s / 25 = 0.25 s: well inside the bound, so it waits here.
        turn = channel_sender_turn(channel="fcm", queue="medium", work=list(range(25)))
        assert turn.waiting
    finally:
        channel_call_timed(channel="fcm", seconds=0.5, count=25)
        pushes.done()


def test_a_fast_channel_defers_no_further_than_the_order_bound(senders):
    senders.NOTIFY_CHANNEL_WAITING_MAX = 2
    senders.NOTIFY_ORDER_WAIT_MAX = 30.0
    channel_call_timed(channel="email", seconds=0.003)  # the provider answers in 3 ms
    _a_send_held_its_slot(0.5, 1)  # a held delivery's look, under load
    emails = Senders("email", "high", 4)
    try:
        assert not channel_slow(channel="email")
        assert all(
            channel_sender_turn(channel="email", queue="high", work=n).waiting for n in (1, 2)
        )
        # Deferrals of batches of 25, each behind those deferred before it, at what a
        # delivery has taken here, four at a time: (2 + 25) / 4 x 0.5 s, then 3.1 s more
        # each ...
        countdowns = [
            channel_sender_turn(channel="email", queue="high", work=list(range(25))).defer
            for _ in range(20)
        ]
        assert countdowns[0] == pytest.approx(27 / 4 * 0.5, rel=0.2)
        assert countdowns == sorted(countdowns)
        # ... but never past the order bound while the provider is fast: a burst's
        # held emails come back to their channel within it.
        assert max(countdowns) == 30.0
    finally:
        emails.done()


def test_routing_sends_at_once_only_on_a_free_sender_and_never_joins_the_line(senders):
    """What the routing thread may take to send what it routed: a free slot of a fast
    channel, else nothing (it publishes instead), never a place in the line."""
    assert channel_sender_take(channel="email", queue="high", work=[1])
    sending = Senders("email", "high", 4)  # the other three slots, then one in the line
    assert sending.taken == 3
    assert channel_waiting_count(channel="email", queue="high") == 1
    assert not channel_sender_take(channel="email", queue="high", work=[2])
    assert channel_waiting_count(channel="email", queue="high") == 1
    # Another channel's senders are its own: SMS still has a free one.
    assert channel_sender_take(channel="sms", queue="high", work=[3])
    sending.done()


def test_routing_leaves_a_slow_channel_and_a_closing_worker_to_the_broker(senders):
    channel_call_begin(channel="sms")
    channel_call_timed(channel="sms", seconds=10.0)  # one call far past the slow mark
    assert not channel_sender_take(channel="sms", queue="high", work=[1])
    assert channel_sender_take(channel="email", queue="high", work=[2])
    channel_lines_close()
    assert not channel_sender_take(channel="email", queue="high", work=[3])
