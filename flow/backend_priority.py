"""A campaign process's PostgreSQL backends run at the process's own low priority.

The `low` worker and relay run under SCHED_IDLE and niced (scripts/worker.sh), so a
login code's threads take the CPU from them at once. But about a third of a campaign
notification's CPU is spent in the PostgreSQL backend serving the worker, and the server
starts every backend at its usual priority: on a host where both run, the campaign's
backends competed with the login code's own backends and threads as equals.

So a process running below the usual priority gives each backend it connects to the
same scheduling policy and niceness, when it can: the database is on this host (a
loopback address or a Unix socket), the backend's process id is visible here as a
`postgres` process, and this process may change another's priority (root, or
CAP_SYS_NICE). Where it cannot (a database on another host, another PID namespace,
no privilege), it says so once in the log and leaves the backends as they are: nothing
else changes. DATABASE_BACKENDS_FOLLOW_PRIORITY=0 turns it off.

One lock needs care: PostgreSQL serializes the commits of every transaction that sent a
NOTIFY (the outbox's insert trigger wakes the relays), and a lowered backend preempted
in such a commit held a login code's intake up to 0.4 s. So a lowered process sends its
NOTIFY after its commit, in a short transaction at the usual priority (`usual_priority`,
used by notify/outbox_wake.py).

The cost is one look-up per borrowed connection; a backend is changed once, when the
process first borrows it from its pool.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

# Hosts at which the database server is on this machine.
_LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1"})
# Marks a psycopg connection whose backend was handled (changed, or found not changeable).
_HANDLED = "_notify_backend_priority_handled"


@dataclass(frozen=True, slots=True)
class ProcessPriority:
    """This process's scheduling: SCHED_IDLE or not, and its niceness."""

    idle: bool
    nice: int

    @property
    def lowered(self) -> bool:
        """Whether this runs below the usual priority (so its backends should too)."""
        return self.idle or self.nice > 0


def process_priority() -> ProcessPriority:
    """How the kernel schedules this process now."""
    return ProcessPriority(
        idle=os.sched_getscheduler(0) == os.SCHED_IDLE,
        nice=os.getpriority(os.PRIO_PROCESS, 0),
    )


def database_is_local(host: str) -> bool:
    """Whether a database HOST setting names this machine (loopback or a Unix socket)."""
    return host in _LOCAL_HOSTS or host.startswith("/")


@cache
def _followed() -> ProcessPriority | None:
    """The priority to give our backends, or None when they keep theirs. Read once: a
    process's policy is set by its start script, before Django loads."""
    if not settings.DATABASE_BACKENDS_FOLLOW_PRIORITY:
        return None
    if not database_is_local(str(settings.DATABASES["default"].get("HOST") or "")):
        return None
    priority = process_priority()
    return priority if priority.lowered else None


def backend_priority_set(pid: int, priority: ProcessPriority) -> bool:
    """Give PostgreSQL backend `pid` this policy (SCHED_IDLE, or the usual one) and
    niceness; False when the process with that id is not a PostgreSQL one here. Raises
    OSError when the kernel refuses."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as comm:
            if not comm.read().startswith("postgres"):
                return False
    except OSError:
        return False  # not in this PID namespace (a server in another container)
    policy = os.SCHED_IDLE if priority.idle else os.SCHED_OTHER
    if os.sched_getscheduler(pid) != policy:
        os.sched_setscheduler(pid, policy, os.sched_param(0))
    if os.getpriority(os.PRIO_PROCESS, pid) != priority.nice:
        os.setpriority(os.PRIO_PROCESS, pid, priority.nice)
    return True


_gave_up = False


def backend_priority_follow(sender: object, connection: Any, **kwargs: Any) -> None:
    """`connection_created` receiver: lower a newly borrowed connection's backend to this
    process's priority, once per backend (see the module docstring)."""
    global _gave_up
    priority = _followed()
    if priority is None or _gave_up:
        return
    pg = connection.connection
    if getattr(pg, _HANDLED, False):
        return
    setattr(pg, _HANDLED, True)
    pid = pg.info.backend_pid
    try:
        if backend_priority_set(pid, priority):
            return
        reason = "its process is not visible on this host"
    except OSError as exc:
        reason = f"the kernel refused ({exc.strerror})"
    _gave_up = True  # the next backends would meet the same
    logger.info(
        "PostgreSQL backends keep their priority (this process runs %s): backend %s: %s",
        "under SCHED_IDLE" if priority.idle else f"at nice {priority.nice}",
        pid,
        reason,
    )


@contextmanager
def usual_priority() -> Iterator[None]:
    """Run the block's statements on a backend at the usual priority, then lower it
    again: for a transaction whose commit others wait for (one that sends a NOTIFY).
    Does nothing in a process that does not lower its backends."""
    from django.db import connection

    priority = _followed()
    if priority is None or _gave_up:
        yield
        return
    connection.ensure_connection()  # borrowed (and lowered) now, not inside the block
    pid = connection.connection.info.backend_pid
    try:
        backend_priority_set(pid, ProcessPriority(idle=False, nice=0))
    except OSError:  # not ours to raise again: it keeps the low priority
        logger.debug("could not raise backend %s", pid, exc_info=True)
    try:
        yield
    finally:
        try:
            backend_priority_set(pid, priority)
        except OSError:
            logger.debug("could not lower backend %s again", pid, exc_info=True)
