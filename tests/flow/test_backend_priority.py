"""A campaign process's PostgreSQL backends share its low CPU priority: a process under
SCHED_IDLE and niced (as scripts/worker.sh starts the `low` worker) gets backends under
SCHED_IDLE at its niceness, so a login code's backends take the CPU from them; a process
at the usual priority leaves its backends as the server started them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from flow.backend_priority import (
    ProcessPriority,
    backend_priority_set,
    database_is_local,
)
from tests.processes import ROOT

# Prints the scheduling policy and niceness of the backend this process is given.
_BACKEND_REPORT = """
import os, django
django.setup()
from django.db import connection
connection.ensure_connection()
pid = connection.connection.info.backend_pid
print(os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid))
"""


def _reported(script: str, prefix: list[str], env: dict[str, str]) -> list[int]:
    """Run `script` in a Django process started with `prefix`; the numbers it prints
    last."""
    out = subprocess.run(
        [*prefix, sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [int(v) for v in out.stdout.splitlines()[-1].split()]


def _backend_of(prefix: list[str], env: dict[str, str]) -> tuple[int, ...]:
    """The policy and niceness of the backend a process started with `prefix` gets."""
    return tuple(_reported(_BACKEND_REPORT, prefix, env))


@pytest.fixture
def low_priority() -> list[str]:
    assert shutil.which("chrt"), "util-linux's chrt, which scripts/worker.sh uses"
    return ["chrt", "--idle", "0", "nice", "-n", "10"]


def test_a_process_under_sched_idle_gets_its_backends_under_sched_idle_at_its_niceness(
    worker_env, low_priority
):
    assert _backend_of(low_priority, worker_env) == (os.SCHED_IDLE, 10)


def test_a_process_at_the_usual_priority_leaves_its_backends_as_the_server_started_them(
    worker_env,
):
    assert _backend_of([], worker_env) == (os.SCHED_OTHER, 0)


def test_turned_off_a_low_process_leaves_its_backends_alone(worker_env, low_priority):
    env = {**worker_env, "DATABASE_BACKENDS_FOLLOW_PRIORITY": "0"}
    assert _backend_of(low_priority, env) == (os.SCHED_OTHER, 0)


def test_only_a_database_on_this_host_is_followed():
    assert database_is_local("127.0.0.1")
    assert database_is_local("localhost")
    assert database_is_local("/var/run/postgresql")
    assert database_is_local("")  # libpq's default: the local socket
    assert not database_is_local("db.internal")
    assert not database_is_local("10.0.0.5")


def test_a_process_id_that_is_not_a_postgres_backend_is_left_alone():
    # This test's own process: visible here, but not PostgreSQL.
    before = os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)
    assert not backend_priority_set(os.getpid(), ProcessPriority(idle=True, nice=19))
    assert (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)) == before


# In a low process: the backend while a block runs under `usual_priority`, then after.
_RAISED_REPORT = """
import os, django
django.setup()
from django.db import connection
from flow.backend_priority import usual_priority
def backend():
    pid = connection.connection.info.backend_pid
    return os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid)
with usual_priority():
    inside = backend()
print(*inside, *backend())
"""


def test_a_transaction_others_wait_for_runs_at_the_usual_priority_then_low_again(
    worker_env, low_priority
):
    assert _reported(_RAISED_REPORT, low_priority, worker_env) == [
        os.SCHED_OTHER,
        0,
        os.SCHED_IDLE,
        10,
    ]
