"""The channel lines' record in Redis: what a lost worker's lines held is published
again once, by one recoverer; a live worker's lines and the sends that left them are
not."""

from __future__ import annotations

import time

import pytest
from django_redis import get_redis_connection

from flow import line_lease
from flow.line_lease import (
    line_join_record,
    line_lease_renew,
    line_left,
    line_record_forget,
    line_token,
    stranded_lines_recover,
)
from tests.conftest import purge_queues
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis():
    client = get_redis_connection("default")
    line_record_forget()
    yield client
    line_record_forget()


@pytest.fixture
def queues(broker, session_worker_paused):
    """The work queues empty before and after, nobody consuming them meanwhile (what the
    recovery publishes names made-up deliveries)."""
    purge_queues(broker)
    yield broker
    purge_queues(broker)


def _ready(broker, queue: str) -> int:
    _, ready, _ = broker.default_channel.queue_declare(queue=queue, passive=True)
    return ready


def _lease_lapses(redis) -> None:
    """What 10 s without a heartbeat leaves: this process's mark gone (its record stays)."""
    redis.delete(f"notify:lines:alive:{line_lease._state.identity()}")


# A worker's heartbeat (the session worker's, on this test process's Redis) may recover a
# lapsed record before the test calls the recovery itself: either way, the broker then
# holds exactly one message per recorded send.


def test_a_lost_workers_waiting_sends_are_published_again_once(redis, queues):
    for work in (101, [102, 103]):
        line_join_record(token=line_token(), channel="email", queue="high", work=work)
    assert stranded_lines_recover() == 0  # alive: nothing to do
    assert _ready(queues, "high") == 0

    _lease_lapses(redis)
    stranded_lines_recover()
    wait_for(lambda: _ready(queues, "high") == 2, timeout=5, what="two sends published")
    redis.delete(f"notify:lines:recovering:{line_lease._state.identity()}")
    assert stranded_lines_recover() == 0  # nothing left for a second recoverer
    assert _ready(queues, "high") == 2
    assert not redis.sismember(line_lease.OWNERS_KEY, line_lease._state.identity())


def test_sends_that_left_the_line_are_struck_off_by_the_next_heartbeat(redis, queues):
    served, waiting = line_token(), line_token()
    line_join_record(token=served, channel="sms", queue="medium", work=7)
    line_join_record(token=waiting, channel="sms", queue="medium", work=8)
    line_left(served)
    line_lease_renew()

    _lease_lapses(redis)
    stranded_lines_recover()
    wait_for(lambda: _ready(queues, "medium") == 1, timeout=5, what="the waiting send published")
    time.sleep(1.5)  # past a heartbeat: nothing more comes
    assert _ready(queues, "medium") == 1


def test_a_record_written_after_its_send_left_is_struck_off_all_the_same(redis):
    token = line_token()
    line_left(token)  # the send ran before its record was written (the two race)
    line_lease_renew()
    line_join_record(token=token, channel="email", queue="high", work=9)
    line_lease_renew()  # the token is struck off a second time
    owner = line_lease._state.identity()
    assert not redis.hexists(f"notify:lines:{owner}", token)
