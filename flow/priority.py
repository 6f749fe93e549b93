"""Campaign work yields to login codes on a shared host.

While a `high` task (a login code's route or send) is being worked on by any worker, a
`low` task (a campaign's route or send, or a round of the analytics shipper) waits
before it starts, for as long as that lasts and at most NOTIFY_CAMPAIGN_YIELD_MAX
seconds, so the CPU, the database and the broker serve the login code first. While it
lasts past the bound, the campaign's tasks take turns across the host
(NOTIFY_CAMPAIGN_YIELD_CONCURRENCY at a time in all the low workers sharing the scope
below), so what runs beside a login code is one campaign
task and its database work, not a burst of all the sender threads of every low process
at once (with two low processes on two CPUs, one task each left no CPU free for the
login code). A turn is short: a long campaign batch gives it back between two provider
calls every NOTIFY_CAMPAIGN_YIELD_CHECK seconds and queues again; and a slot given back
rests before the next turn, so campaign work takes at most NOTIFY_CAMPAIGN_YIELD_SHARE
of the time while login codes are in flight (`turn_rest`). A campaign is slowed
only while transactional work is in flight, and never stopped: a turn always runs, and
a task that got none within TURN_TTL_BOUNDS bounds (its holder died or hangs) goes
without one.

The signal is one Redis key per host (NOTIFY_CAMPAIGN_YIELD_SCOPE, the host name unless
set: what competes is the CPU the processes share, as with the low worker's `nice`) that
intake sets when it accepts a `high` notification due now, and `high` workers keep alive
(NOTIFY_CAMPAIGN_YIELD_WINDOW after their last task started;
written at most four times per window per process, so a burst of login codes costs a
handful of writes), and that `low` workers read once per task. A turn is a Redis key per
slot of the same scope, taken by one thread per process (the others wait on the
process's semaphore), given back by its holder, and gone by itself TURN_TTL_BOUNDS times
the bound after it was taken, so a worker killed while holding one frees it. Redis being
away never holds anything up: the login code goes on, the campaign too.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


def busy_key() -> str:
    """The Redis key that says `high` work is in flight on this host."""
    return f"notify:priority:high_busy:{settings.NOTIFY_CAMPAIGN_YIELD_SCOPE}"


_last_mark = [float("-inf")]  # when this process last wrote the key (monotonic)


def high_work_mark() -> None:
    """A `high` notification was accepted, or a `high` task starts: keep the busy key
    alive for another window."""
    window = settings.NOTIFY_CAMPAIGN_YIELD_WINDOW
    if window <= 0:
        return
    now = time.monotonic()
    if now - _last_mark[0] < window / 4:
        return
    _last_mark[0] = now
    try:
        get_redis_connection("default").set(busy_key(), 1, px=max(1, int(window * 1000)))
    except RedisError:
        logger.warning("priority: could not mark high work in flight", exc_info=True)


# A turn lives this many bounds (NOTIFY_CAMPAIGN_YIELD_MAX) unless given back: longer
# than a campaign task holds one between two yield checks, short enough that a killed
# holder frees it soon.
TURN_TTL_BOUNDS = 4
TURN_POLL_SECONDS = 0.01  # how often a process's waiting thread looks for a free turn

# Give a turn back only if it is still the holder's (it may have lapsed and been taken):
# at once, or resting ARGV[2] ms first (the slot stays taken, by nobody, until then).
_GIVE_BACK = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then return redis.call('set', KEYS[1], 'resting', 'PX', ARGV[2]) end
return redis.call('del', KEYS[1])
"""


def turn_keys() -> list[str]:
    """The Redis keys of the host's campaign turns, one per slot."""
    scope = settings.NOTIFY_CAMPAIGN_YIELD_SCOPE
    size = max(1, settings.NOTIFY_CAMPAIGN_YIELD_CONCURRENCY)
    return [f"notify:priority:turn:{scope}:{slot}" for slot in range(size)]


class _Turns:
    """The turns campaign tasks take while high work outlasts the bound: first this
    process's semaphore (its threads wait here, not on Redis), then a host-wide slot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._semaphore: threading.BoundedSemaphore | None = None
        self._size = 0
        self.held = threading.local()

    def semaphore(self) -> threading.BoundedSemaphore:
        size = max(1, settings.NOTIFY_CAMPAIGN_YIELD_CONCURRENCY)
        with self._lock:
            if self._semaphore is None or self._size != size:
                self._semaphore, self._size = threading.BoundedSemaphore(size), size
            return self._semaphore


_turns = _Turns()
_quiet_seen = [float("-inf")]  # when this process last read that no `high` work is in flight
_busy_seen = [float("-inf")]  # when this process last read that `high` work is in flight
# Held by the one thread that reads afresh; the others take the last reading meanwhile.
_reading = threading.Lock()


def host_turn_take(*, until: float) -> tuple[str, str, float] | None:
    """Take a free host-wide turn, looking again every TURN_POLL_SECONDS until `until`
    (monotonic); its (key, token, when taken), or None when none came free in time (or
    Redis is away): the task then goes without one, as it goes without the process's."""
    ttl_ms = max(1, int(settings.NOTIFY_CAMPAIGN_YIELD_MAX * TURN_TTL_BOUNDS * 1000))
    token = secrets.token_hex(8)
    keys = turn_keys()
    try:
        client = get_redis_connection("default")
        while True:
            for key in keys:
                if client.set(key, token, nx=True, px=ttl_ms):
                    return key, token, time.monotonic()
            if time.monotonic() >= until:
                return None
            time.sleep(TURN_POLL_SECONDS)
    except RedisError:
        logger.warning("priority: could not take a campaign turn", exc_info=True)
        return None


def turn_rest(held: float) -> float:
    """Seconds a slot rests after a turn held `held` seconds, so that while login codes
    are in flight campaign work takes at most NOTIFY_CAMPAIGN_YIELD_SHARE of the slot's
    time (at most the bound). The CPU it leaves idle is what keeps the login codes fast:
    a host whose every CPU is busy is also where the hypervisor pauses the whole VM (the
    bench machine showed 20 to 60 ms pauses of every process, even at nice -20, only
    while both CPUs were busy)."""
    share = settings.NOTIFY_CAMPAIGN_YIELD_SHARE
    if share >= 1:
        return 0.0
    return min(settings.NOTIFY_CAMPAIGN_YIELD_MAX, held * (1 - share) / share)


def host_turn_give_back(turn: tuple[str, str, float]) -> None:
    """Free a host-wide turn this thread holds, after its rest (`turn_rest`), unless it
    lapsed and another took it."""
    key, token, taken_at = turn
    rest_ms = int(turn_rest(time.monotonic() - taken_at) * 1000)
    try:
        get_redis_connection("default").eval(_GIVE_BACK, 1, key, token, rest_ms)
    except RedisError:  # it lapses by itself
        logger.warning("priority: could not give a campaign turn back", exc_info=True)


def low_work_yield(*, sleep: Callable[[float], None] = time.sleep, fresh: float = 0.0) -> float:
    """Before a `low` task: wait while `high` work is in flight, at most
    NOTIFY_CAMPAIGN_YIELD_MAX seconds; if it is still in flight then, wait for a turn
    (this process's, then the host's; TURN_TTL_BOUNDS bounds at most: the longest a live
    holder keeps one). Returns the seconds waited. A task that took
    a turn gives it back in `low_work_done`.

    `fresh`: a reading by any thread of this process that no `high` work was in flight,
    at most this many seconds old, is taken as it is (no Redis read): a campaign's sender
    threads check between messages, and one reading serves them all."""
    if fresh > 0 and time.monotonic() - _quiet_seen[0] < fresh:
        return 0.0
    bound = settings.NOTIFY_CAMPAIGN_YIELD_MAX
    waited = 0.0
    busy = False
    try:
        client = get_redis_connection("default")
        while True:
            read_at = time.monotonic()
            left_ms = client.pttl(busy_key())
            busy = left_ms > 0
            if not busy:
                _quiet_seen[0] = read_at
            else:
                _busy_seen[0] = read_at
            if not busy or waited >= bound:
                break
            step = min(left_ms / 1000, bound - waited)
            sleep(step)
            waited += step
    except RedisError:
        logger.warning("priority: could not read high work in flight", exc_info=True)
    if busy and bound > 0:
        started = time.monotonic()
        semaphore = _turns.semaphore()
        # Up to a turn's lifetime, not the bound: a task that went without a turn once
        # the bound passed would run beside the holder, and a login wave would again
        # have every low process's task beside it.
        longest = bound * TURN_TTL_BOUNDS
        if semaphore.acquire(timeout=longest):
            _turns.held.semaphore = semaphore
            _turns.held.host = host_turn_take(until=started + longest)
        waited += time.monotonic() - started
    return waited


def high_work_now(*, fresh: float) -> bool:
    """Whether `high` work is in flight: this process's last reading if it is at most
    `fresh` seconds old, else a new one (one Redis read; Redis away reads as no). While
    another thread of the process reads, the last reading."""
    now = time.monotonic()
    if now - max(_busy_seen[0], _quiet_seen[0]) < fresh:
        return _busy_seen[0] > _quiet_seen[0]
    # One read per process at a time: a campaign's waiting threads all find the reading
    # stale at once, and each asking Redis was a round trip per thread for one answer.
    if not _reading.acquire(blocking=False):
        return _busy_seen[0] > _quiet_seen[0]
    try:
        busy = get_redis_connection("default").pttl(busy_key()) > 0
    except RedisError:
        return False
    finally:
        _reading.release()
    (_busy_seen if busy else _quiet_seen)[0] = now
    return busy


def high_work_seen() -> bool:
    """Whether this process's last reading, at most NOTIFY_CAMPAIGN_YIELD_WINDOW old, said
    `high` work is in flight (the reading a `low` task's start made)."""
    window = settings.NOTIFY_CAMPAIGN_YIELD_WINDOW
    return _busy_seen[0] > _quiet_seen[0] and time.monotonic() - _busy_seen[0] < window


def low_work_done() -> None:
    """After a `low` task: give back the turn it took, if it took one."""
    host = getattr(_turns.held, "host", None)
    if host is not None:
        _turns.held.host = None
        host_turn_give_back(host)
    semaphore = getattr(_turns.held, "semaphore", None)
    if semaphore is not None:
        _turns.held.semaphore = None
        semaphore.release()
