"""Campaign work yields to login codes on a shared host.

While a `high` task (a login code's route or send) is being worked on by any worker, a
`low` task (a campaign's route or send) waits before it starts, for as long as that lasts
and at most NOTIFY_CAMPAIGN_YIELD_MAX seconds, so the CPU, the database and the broker
serve the login code first. While it lasts past the bound, the campaign's tasks in one
process also take turns (NOTIFY_CAMPAIGN_YIELD_CONCURRENCY at a time, waiting for a turn
at most the bound again), so what runs beside a login code is one campaign task, not a
burst of all the sender threads at once. A campaign is slowed only while transactional
work is in flight, and never stopped: each of its tasks goes after twice the bound at
the latest.

The signal is one Redis key per host (NOTIFY_CAMPAIGN_YIELD_SCOPE, the host name unless
set: what competes is the CPU the processes share, as with the low worker's `nice`) that
`high` workers keep alive (NOTIFY_CAMPAIGN_YIELD_WINDOW after their last task started;
written at most four times per window per process, so a burst of login codes costs a
handful of writes), and that `low` workers read once per task. Redis being away never
holds anything up: the login code goes on, the campaign too.
"""

from __future__ import annotations

import logging
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
    """A `high` task starts: keep the busy key alive for another window."""
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


class _Turns:
    """The turns campaign tasks of this process take while high work outlasts the bound."""

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


def low_work_yield(*, sleep: Callable[[float], None] = time.sleep, fresh: float = 0.0) -> float:
    """Before a `low` task: wait while `high` work is in flight, at most
    NOTIFY_CAMPAIGN_YIELD_MAX seconds; if it is still in flight then, wait for this
    process's turn (as long again at most). Returns the seconds waited. A task that took
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
        if semaphore.acquire(timeout=bound):
            _turns.held.semaphore = semaphore
        waited += time.monotonic() - started
    return waited


def low_work_done() -> None:
    """After a `low` task: give back the turn it took, if it took one."""
    semaphore = getattr(_turns.held, "semaphore", None)
    if semaphore is not None:
        _turns.held.semaphore = None
        semaphore.release()
