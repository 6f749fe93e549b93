"""Campaign work's database statements run a few at a time on a host.

A low worker's sender threads overlap provider calls, so without a limit a dozen campaign
statements can be on the database at once (two low processes of eight threads). They do
not go faster that way: they queue for the database's CPUs, which they share with the
login codes. A login code that arrives then has each of its steps' statements and
processes wait behind all of them, and no yield can help: statements already running
cannot be called back (flow/priority.py holds back the campaign's *next* tasks).

So every statement a `low` task runs takes one of NOTIFY_CAMPAIGN_DB_CONCURRENCY slots of
the host (NOTIFY_CAMPAIGN_YIELD_SCOPE, the processes that share the CPUs; one per CPU
unless set) first, and while `high` work is in flight one of the first
NOTIFY_CAMPAIGN_DB_BUSY_CONCURRENCY of them (half the CPUs unless set), so that at least
the other CPUs are left to the login codes as soon as the statements already running
end. A thread waits on its process's semaphore, then one thread per process on a
host-wide lock file (`flock`, which the kernel frees when its holder dies, so a killed
worker never keeps a slot). The campaign keeps most of its throughput (a statement's CPU
is the same whether it queues inside PostgreSQL or here, and the threads go on with
rendering and provider calls meanwhile), and what a login code finds on the database is
at most that many campaign statements.

A statement waits at most NOTIFY_CAMPAIGN_DB_WAIT seconds for a slot, then runs without
one: a statement that waits for a row lock while holding a slot can hold the others up
no longer than that, and a lock directory that cannot be written never stops a campaign.

The appends a round's announcement makes in its open transaction (status webhook and
analytics events, `statements_unslotted`) take no slot while no login code is in flight:
the round has already written and holds its rows' locks, so queueing there would hold
those locks for the wait, and the short inserts would queue behind whole statements for
what is the round's last step. While one is in flight they take slots like the rest, so
what a login code finds on the database is still at most the slots' statements.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from flow.priority import high_work_now

logger = logging.getLogger(__name__)

Slot = tuple[threading.BoundedSemaphore, int | None]  # what `take` gives: semaphore, lock file
POLL_SECONDS = 0.001  # how often a process's waiting thread tries the host's slots again
# How old a reading of "login codes in flight" may be (one Redis read per process at most
# this often while campaign statements run).
BUSY_READING_SECONDS = 0.01


class _Slots:
    """This process's side of the host's statement slots: a semaphore for its threads,
    and one open lock file per host slot (a `flock` belongs to the open file)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._size = 0
        self._place: tuple[int, str, str] | None = None  # (size, lock directory, scope)
        self._semaphore = threading.BoundedSemaphore(1)
        self._free: list[int] = []  # lock files of host slots this process does not hold
        self._slot_of: dict[int, int] = {}  # lock file -> the host slot's number
        self._failed = False  # the lock files could not be opened: the semaphore alone

    def _reset(self, size: int, place: tuple[int, str, str]) -> None:
        """(Re)open the lock files for `size` slots; under self._lock."""
        for fd in self._free:
            os.close(fd)
            self._slot_of.pop(fd, None)
        self._size, self._semaphore, self._free, self._failed = (
            size,
            threading.BoundedSemaphore(size),
            [],
            False,
        )
        self._place = place
        _, directory, scope = place
        scope = scope.replace("/", "_")
        try:
            for slot in range(size):
                path = os.path.join(directory, f"notify-campaign-db-{scope}-{slot}.lock")
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
                self._free.append(fd)
                self._slot_of[fd] = slot
        except OSError:
            logger.warning(
                "campaign statements: no lock files in %s; per process only",
                directory,
                exc_info=True,
            )
            for fd in self._free:  # the ones that did open: unused from now on
                os.close(fd)
            self._free, self._slot_of, self._failed = [], {}, True

    def take(self, size: int, *, until: float, usable: Callable[[], int]) -> Slot | None:
        """A slot for one statement: (the semaphore taken, the host slot's lock file or
        None), or None when none came free before `until` (monotonic). Only the first
        `usable()` (at least one) of the host's `size` slots are tried, asked afresh at
        each try."""
        place = (size, settings.NOTIFY_CAMPAIGN_DB_LOCK_DIR, settings.NOTIFY_CAMPAIGN_YIELD_SCOPE)
        with self._lock:
            if self._place != place:
                self._reset(size, place)
            semaphore = self._semaphore
        if not semaphore.acquire(timeout=max(0.0, until - time.monotonic())):
            return None
        while True:
            limit = max(1, usable())  # a Redis read at times: not under the lock
            with self._lock:
                if self._failed or semaphore is not self._semaphore:
                    return semaphore, None
                for fd in [fd for fd in self._free if self._slot_of[fd] < limit]:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    self._free.remove(fd)
                    return semaphore, fd
            if time.monotonic() >= until:
                semaphore.release()
                return None
            time.sleep(POLL_SECONDS)

    def give_back(self, semaphore: threading.BoundedSemaphore, fd: int | None) -> None:
        """Free what `take` returned."""
        if fd is not None:
            with self._lock:
                fcntl.flock(fd, fcntl.LOCK_UN)
                if semaphore is self._semaphore:
                    self._free.append(fd)
                else:  # the size changed meanwhile: this file is no longer ours
                    os.close(fd)
                    self._slot_of.pop(fd, None)
        semaphore.release()


_slots = _Slots()
_unslotted = threading.local()  # `on`: this thread's statements take no slot for now


@contextmanager
def statements_unslotted() -> Iterator[None]:
    """Inside: this thread's campaign statements run without taking a slot while no
    login code is in flight."""
    before = getattr(_unslotted, "on", False)
    _unslotted.on = True
    try:
        yield
    finally:
        _unslotted.on = before


def _usable_slots() -> int:
    """How many of the host's slots a campaign statement may take now: fewer while
    `high` work is in flight (a reading at most BUSY_READING_SECONDS old)."""
    size = settings.NOTIFY_CAMPAIGN_DB_CONCURRENCY
    if high_work_now(fresh=BUSY_READING_SECONDS):
        return min(size, settings.NOTIFY_CAMPAIGN_DB_BUSY_CONCURRENCY)
    return size


def _campaign_statement(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """Django execute wrapper: one of the host's campaign statement slots around it."""
    size = settings.NOTIFY_CAMPAIGN_DB_CONCURRENCY
    if size <= 0:
        return execute(sql, params, many, context)
    if getattr(_unslotted, "on", False) and not high_work_now(fresh=BUSY_READING_SECONDS):
        return execute(sql, params, many, context)
    slot = _slots.take(
        size, until=time.monotonic() + settings.NOTIFY_CAMPAIGN_DB_WAIT, usable=_usable_slots
    )
    try:
        return execute(sql, params, many, context)
    finally:
        if slot is not None:
            _slots.give_back(*slot)


def campaign_statements_limited() -> None:
    """Before a `low` task: this thread's database statements each take one of the
    host's NOTIFY_CAMPAIGN_DB_CONCURRENCY campaign statement slots while they run."""
    from django.db import connection

    if _campaign_statement not in connection.execute_wrappers:
        connection.execute_wrappers.append(_campaign_statement)


def campaign_statements_free() -> None:
    """After a task: this thread's statements take no slot (a worker serving several
    queues may run a `high` task on it next)."""
    from django.db import connection

    if _campaign_statement in connection.execute_wrappers:
        connection.execute_wrappers.remove(_campaign_statement)
