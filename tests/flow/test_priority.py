"""Campaign work yields to login codes: while a `high` task is in flight on this host, a
`low` task waits — as long as that lasts, and never longer than the bound."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_redis import get_redis_connection

from flow import priority


@pytest.fixture
def fresh(settings):
    settings.NOTIFY_CAMPAIGN_YIELD_WINDOW = 0.2  # the production default
    settings.NOTIFY_CAMPAIGN_YIELD_MAX = 0.5
    settings.NOTIFY_CAMPAIGN_YIELD_SCOPE = "test-host"
    redis = get_redis_connection("default")
    redis.delete(priority.busy_key(), *priority.turn_keys())
    priority._last_mark[0] = float("-inf")
    priority._quiet_seen[0] = float("-inf")
    priority._busy_seen[0] = float("-inf")
    yield
    priority.low_work_done()
    redis.delete(priority.busy_key(), *priority.turn_keys())


def test_a_low_task_starts_at_once_when_no_high_work_is_in_flight(fresh):
    slept: list[float] = []
    assert priority.low_work_yield(sleep=slept.append) == 0
    assert slept == []


def test_a_low_task_waits_while_high_work_is_in_flight_but_never_past_the_bound(fresh):
    priority.high_work_mark()
    ttl = get_redis_connection("default").pttl(priority.busy_key())
    assert 0 < ttl <= 200
    slept: list[float] = []
    # The key outlives every (recorded, not slept) wait here: only the bound ends it.
    get_redis_connection("default").pexpire(priority.busy_key(), 60_000)
    # (Past the bound it takes this process's turn too: free here, so at once.)
    assert priority.low_work_yield(sleep=slept.append) == pytest.approx(0.5, abs=0.05)
    assert sum(slept) == pytest.approx(0.5)


def test_sender_threads_share_a_fresh_reading_and_read_again_once_it_is_stale(fresh):
    client = get_redis_connection("default")
    assert priority.low_work_yield(sleep=lambda s: None, fresh=30) == 0  # reads: quiet
    priority.high_work_mark()
    client.pexpire(priority.busy_key(), 60_000)
    # Another sender thread within `fresh` of that reading takes it: no read, no wait.
    waited: list[float] = []
    reader = threading.Thread(
        target=lambda: waited.append(priority.low_work_yield(sleep=lambda s: None, fresh=30))
    )
    reader.start()
    reader.join()
    assert waited == [0]
    # Once the reading is older than `fresh`, the next check reads, and waits.
    time.sleep(0.05)
    slept: list[float] = []
    assert priority.low_work_yield(sleep=slept.append, fresh=0.01) == pytest.approx(0.5, abs=0.05)


def test_high_work_on_another_host_does_not_hold_campaigns_here(fresh, settings):
    priority.high_work_mark()
    settings.NOTIFY_CAMPAIGN_YIELD_SCOPE = "another-host"
    assert priority.low_work_yield(sleep=lambda s: None) == 0


def test_a_burst_of_high_tasks_writes_the_key_a_few_times_not_once_each(fresh):
    client = get_redis_connection("default")
    priority.high_work_mark()
    client.delete(priority.busy_key())
    priority.high_work_mark()  # within a quarter window of the last write: not written
    assert not client.exists(priority.busy_key())


def test_a_zero_window_turns_yielding_off(fresh, settings):
    settings.NOTIFY_CAMPAIGN_YIELD_WINDOW = 0
    priority.high_work_mark()
    assert not get_redis_connection("default").exists(priority.busy_key())


def test_past_the_bound_campaign_tasks_of_a_process_run_one_at_a_time(fresh):
    get_redis_connection("default").set(priority.busy_key(), 1, px=60_000)
    running, most, lock = [0], [0], threading.Lock()

    def low_task() -> None:
        priority.low_work_yield(sleep=lambda s: None)  # the bound passes at once here
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)  # the task's work
        with lock:
            running[0] -= 1
        priority.low_work_done()

    threads = [threading.Thread(target=low_task) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1


def test_a_turn_not_given_back_holds_the_next_task_only_up_to_the_bound(fresh):
    get_redis_connection("default").set(priority.busy_key(), 1, px=60_000)
    priority.low_work_yield(sleep=lambda s: None)  # takes the turn, keeps it
    waited: list[float] = []
    other = threading.Thread(
        target=lambda: waited.append(priority.low_work_yield(sleep=lambda s: None))
    )
    started = time.monotonic()
    other.start()
    other.join()
    # A turn's lifetime (TURN_TTL_BOUNDS bounds of 0.5 s), then it goes without one.
    lifetime = priority.TURN_TTL_BOUNDS * 0.5
    assert lifetime - 0.05 <= time.monotonic() - started < lifetime + 1.5
    # Counted: the bound waiting for high work (recorded, not slept), then the turn's wait.
    assert waited[0] == pytest.approx(0.5 + lifetime, abs=0.1)


def test_no_turn_is_taken_when_no_high_work_is_in_flight(fresh):
    priority.low_work_yield(sleep=lambda s: None)
    assert getattr(priority._turns.held, "semaphore", None) is None


def test_past_the_bound_a_campaign_task_waits_for_another_processs_turn_then_takes_it(fresh):
    redis = get_redis_connection("default")
    redis.set(priority.busy_key(), 1, px=60_000)
    [turn] = priority.turn_keys()  # one campaign task at a time on the host
    redis.set(turn, "another-process", px=60_000)  # its task holds the host's turn
    threading.Timer(0.2, redis.delete, args=[turn]).start()  # and gives it back

    started = time.monotonic()
    priority.low_work_yield(sleep=lambda s: None)
    assert 0.15 <= time.monotonic() - started < 0.45  # at the give-back, before the bound
    mine = redis.get(turn)
    assert mine not in (None, b"another-process")
    # Held at most TURN_TTL_BOUNDS bounds: a worker killed now frees it by itself.
    assert 0 < redis.pttl(turn) <= priority.TURN_TTL_BOUNDS * 500
    priority.low_work_done()
    assert redis.get(turn) in (None, b"resting")  # given back (its rest is a few ms)


def test_a_turn_held_elsewhere_too_long_holds_a_campaign_task_only_its_lifetime(fresh):
    redis = get_redis_connection("default")
    redis.set(priority.busy_key(), 1, px=60_000)
    [turn] = priority.turn_keys()
    redis.set(turn, "another-process", px=60_000)  # held past any live holder's time

    started = time.monotonic()
    waited = priority.low_work_yield(sleep=lambda s: None)
    lifetime = priority.TURN_TTL_BOUNDS * 0.5
    assert lifetime - 0.05 <= time.monotonic() - started < lifetime + 1.5  # then it goes
    assert waited == pytest.approx(0.5 + lifetime, abs=0.1)
    priority.low_work_done()
    assert redis.get(turn) == b"another-process"  # not ours: never given back by us


def test_a_lapsed_turn_taken_by_another_is_not_given_back_by_its_first_holder(fresh):
    redis = get_redis_connection("default")
    redis.set(priority.busy_key(), 1, px=60_000)
    [turn] = priority.turn_keys()
    priority.low_work_yield(sleep=lambda s: None)
    assert redis.exists(turn)
    redis.set(turn, "another-process", px=60_000)  # ours lapsed; another took it
    priority.low_work_done()
    assert redis.get(turn) == b"another-process"


def test_turns_across_the_host_run_as_many_campaign_tasks_as_configured(fresh, settings):
    settings.NOTIFY_CAMPAIGN_YIELD_CONCURRENCY = 2
    redis = get_redis_connection("default")
    redis.set(priority.busy_key(), 1, px=60_000)
    first, second = priority.turn_keys()
    redis.set(first, "another-process", px=60_000)
    started = time.monotonic()
    priority.low_work_yield(sleep=lambda s: None)
    assert time.monotonic() - started < 0.2  # the second slot was free
    assert redis.get(second) not in (None, b"another-process")


@pytest.mark.parametrize(("share", "rest"), [(0.5, 0.2), (0.25, 0.5), (1.0, 0.0)])
def test_a_slot_given_back_rests_so_the_campaign_takes_its_share_of_the_time(
    fresh, settings, share, rest
):
    settings.NOTIFY_CAMPAIGN_YIELD_SHARE = share
    redis = get_redis_connection("default")
    redis.set(priority.busy_key(), 1, px=60_000)
    [turn] = priority.turn_keys()
    before = time.monotonic()
    priority.low_work_yield(sleep=lambda s: None)
    taken = time.monotonic()
    time.sleep(0.2)  # the campaign task's work, its turn held
    given_back = time.monotonic()
    priority.low_work_done()
    after = time.monotonic()
    if not rest:
        assert not redis.exists(turn)
        return
    assert redis.get(turn) == b"resting"
    # Held about 0.2 s: at share 1/2 it rests as long again; at 1/4 three times as long,
    # but never past the bound (0.5 s). Bounds from the hold's shortest and longest
    # possible length, as a loaded box stretches the sleep and the Redis round trips.
    resting = redis.pttl(turn) / 1000
    since = time.monotonic() - given_back  # the most it can have run down already
    shortest, longest = given_back - taken, after - before
    ms = 0.002  # whole milliseconds, rounded down on the way in and out
    assert resting <= min(0.5, longest * (1 - share) / share)
    assert resting >= min(0.5, shortest * (1 - share) / share) - since - ms
    assert resting >= rest - since - ms  # `rest`: after a hold of exactly 0.2 s
    started = time.monotonic()
    priority.low_work_yield(sleep=lambda s: None)  # the next task waits out the rest
    assert resting - 0.1 < time.monotonic() - started < resting + 0.3
    assert redis.get(turn) not in (None, b"resting")


def test_a_fan_out_batch_is_small_while_login_codes_are_in_flight(fresh, settings):
    from campaigns.fanout import fan_out_batch_size

    settings.NOTIFY_CAMPAIGN_BATCH_SIZE = 2000
    settings.NOTIFY_CAMPAIGN_BUSY_BATCH_SIZE = 200
    priority.low_work_yield(sleep=lambda s: None)  # a low task starts: nothing in flight
    assert fan_out_batch_size() == 2000
    get_redis_connection("default").set(priority.busy_key(), 1, px=60_000)
    priority.low_work_yield(sleep=lambda s: None)  # the next one reads high work
    assert fan_out_batch_size() == 200
    time.sleep(0.25)  # that reading is older than the window (0.2 s)
    assert fan_out_batch_size() == 2000


def test_one_thread_reads_whether_high_work_is_in_flight_while_the_others_take_the_last_reading(
    fresh,
):
    priority.high_work_mark()
    assert priority.high_work_now(fresh=0.01) is True
    get_redis_connection("default").delete(priority.busy_key())  # the login code is done
    time.sleep(0.02)  # the reading is stale now
    with priority._reading:  # another thread of this process is reading Redis
        assert priority.high_work_now(fresh=0.01) is True  # the last reading, no read
    assert priority.high_work_now(fresh=0.01) is False  # its own read, fresh


SHIPPED = {"order_number": "A-1", "delivery_date": "2026-12-04", "items_count": 1}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("category", "payload", "in_a_day", "marked"),
    [
        ("security.login_code", {"code": "123456"}, False, True),
        ("security.login_code", {"code": "123456"}, True, False),  # due tomorrow
        ("order.shipped", SHIPPED, False, False),
    ],
)
def test_accepting_a_login_code_due_now_starts_the_campaigns_yield(
    fresh, api, category, payload, in_a_day, marked
):
    api.put("/v1/users/yield-1", {"email": "yield-1@example.com"}, format="json")
    body = {
        "event_id": f"yield-{category}-{in_a_day}",
        "user_id": "yield-1",
        "category": category,
        "payload": payload,
    }
    if in_a_day:
        body["send_at"] = (timezone.now() + timedelta(days=1)).isoformat()
    response = api.post("/v1/notifications", body, format="json")
    assert response.status_code == 202, response.content
    # At intake, before any worker has seen it: a campaign on this host yields from here.
    assert bool(get_redis_connection("default").exists(priority.busy_key())) is marked
