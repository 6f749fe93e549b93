"""Each channel's share of a worker's sender threads (plain functions, in process)."""

from __future__ import annotations

import threading

import pytest

from deliveries.pipeline.senders import (
    channel_call_timed,
    channel_defer_seconds,
    channel_sender,
    channel_senders_reset,
    channel_slow,
)


@pytest.fixture
def senders(settings):
    settings.NOTIFY_WORKER_THREADS = 8
    settings.NOTIFY_CHANNEL_SENDERS = {"email": 4, "sms": 4, "webpush": 8, "fcm": 8}
    settings.NOTIFY_CHANNEL_SLOW_SECONDS = 3.0
    settings.NOTIFY_CHANNEL_SLOW_SENDERS = 2
    settings.NOTIFY_CHANNEL_DEFER = 1.0
    settings.NOTIFY_CHANNEL_DEFER_MAX = 30.0
    channel_senders_reset()
    yield settings
    channel_senders_reset()


def hold(channel: str, queue: str, count: int) -> tuple[list[bool], threading.Event]:
    """`count` threads each try to take a slot and keep it until released; their answers."""
    taken: list[bool] = []
    ready = threading.Barrier(count + 1)
    release = threading.Event()

    def sender() -> None:
        with channel_sender(channel=channel, queue=queue) as free:
            taken.append(free)
            ready.wait()
            release.wait()

    for _ in range(count):
        threading.Thread(target=sender, daemon=True).start()
    ready.wait()
    return taken, release


def test_one_channel_takes_at_most_its_share_and_the_others_keep_theirs(senders):
    emails, release = hold("email", "high", 6)
    try:
        assert sorted(emails) == [False, False, True, True, True, True]
        with channel_sender(channel="sms", queue="high") as free:
            assert free  # email's full share leaves SMS its own
        with channel_sender(channel="email", queue="medium") as free:
            assert free  # another class has its own share
    finally:
        release.set()


def test_no_channel_takes_more_than_half_the_threads(senders):
    pushes, release = hold("webpush", "high", 8)  # its setting says 8, the pool has 8
    try:
        assert pushes.count(True) == 4
    finally:
        release.set()


def test_a_slow_provider_gets_fewer_senders_and_its_sends_wait_about_a_call(senders):
    channel_call_timed(channel="email", seconds=20.0)  # a relay answering after 20 s
    assert channel_slow(channel="email")
    assert not channel_slow(channel="sms")
    emails, release = hold("email", "high", 4)
    try:
        assert emails.count(True) == 2
        assert channel_defer_seconds(channel="email") == 20.0
        assert channel_defer_seconds(channel="sms") == 1.0
    finally:
        release.set()


def test_a_provider_fast_again_gets_its_share_back(senders):
    channel_call_timed(channel="email", seconds=20.0)
    for _ in range(12):
        channel_call_timed(channel="email", seconds=0.05)
    assert not channel_slow(channel="email")
    emails, release = hold("email", "high", 4)
    try:
        assert emails.count(True) == 4
    finally:
        release.set()


def test_a_message_that_does_not_name_its_channel_is_never_refused(senders):
    _, release = hold("email", "high", 4)  # email's share is taken
    try:
        with channel_sender(channel=None, queue="high") as free:
            assert free
    finally:
        release.set()
