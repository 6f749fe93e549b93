"""Campaign work's database statements run a few at a time on a host: every statement of
a `low` task takes one of the host's slots (lock files the kernel frees when a holder
dies), fewer while login codes are in flight; a login code's statements take none."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection
from django_redis import get_redis_connection

from campaigns.models import Campaign
from deliveries.models import Delivery
from flow import campaign_statements, priority
from notify.models import Notification, Recipient
from tests.campaigns.conftest import campaign_body, seed_recipients
from tests.processes import ROOT
from tests.waiting import wait_for


@pytest.fixture
def host(settings, tmp_path):
    """A host of its own (scope and lock directory), with the production wait."""
    scope = f"test-statements-{uuid.uuid4().hex[:8]}"
    settings.NOTIFY_CAMPAIGN_YIELD_SCOPE = scope
    settings.NOTIFY_CAMPAIGN_DB_LOCK_DIR = str(tmp_path)
    settings.NOTIFY_CAMPAIGN_DB_WAIT = 0.5
    yield {"NOTIFY_CAMPAIGN_YIELD_SCOPE": scope, "NOTIFY_CAMPAIGN_DB_LOCK_DIR": str(tmp_path)}
    get_redis_connection("default").delete(priority.busy_key())
    priority._quiet_seen[0] = priority._busy_seen[0] = float("-inf")
    campaign_statements.campaign_statements_free()


def statement_process(env: dict[str, str], seconds: float) -> subprocess.Popen:
    """Another process about to run one campaign statement of `seconds`: connected, it
    runs the statement once a line is written to its standard input."""
    run = subprocess.Popen(
        [sys.executable, "-m", "tests.scripts.campaign_statement", str(seconds)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = run.stdout.readline()
    assert line == "ready\n", line or run.stderr.read()[-2000:]
    return run


def statements_side_by_side(worker_env, host, seconds: float = 0.6, **overrides: str):
    """Two processes each run one campaign statement of `seconds`, both told to start at
    the same moment; PostgreSQL's (began, ended) of each."""
    env = {**worker_env, **host, "NOTIFY_CAMPAIGN_DB_WAIT": "30", **overrides}
    runs = [statement_process(env, seconds) for _ in range(2)]
    for run in runs:
        run.stdin.write("go\n")
        run.stdin.flush()
    spans = []
    for run in runs:
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err.decode()[-2000:]
        span = json.loads(out)
        spans.append((span["began"], span["ended"]))
    return sorted(spans)


@pytest.mark.parametrize(
    ("slots", "busy_slots", "login_codes_in_flight", "side_by_side"),
    [
        ("1", "1", False, False),
        ("2", "1", False, True),
        ("2", "1", True, False),
        ("2", "2", True, True),
    ],
)
def test_campaign_statements_of_two_processes_take_the_hosts_slots(
    worker_env, host, slots, busy_slots, login_codes_in_flight, side_by_side
):
    if login_codes_in_flight:
        get_redis_connection("default").set(priority.busy_key(), 1, px=60_000)
    (_, first_ended), (second_began, _) = statements_side_by_side(
        worker_env,
        host,
        NOTIFY_CAMPAIGN_DB_CONCURRENCY=slots,
        NOTIFY_CAMPAIGN_DB_BUSY_CONCURRENCY=busy_slots,
    )
    if side_by_side:
        assert second_began < first_ended
    else:
        assert second_began >= first_ended


def backend_sleeping(application_name: str) -> int | None:
    """The pid of the backend of that name running the holder's long statement, if any.

    The holder's connection pool opens more connections of the same name, and each is
    briefly active while it is set up: only the statement tells the holder's backend."""
    with connection.cursor() as cursor:
        # Inside the test's transaction PostgreSQL would answer from its first snapshot.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND state = 'active' "
            "AND query LIKE '%%pg_sleep%%'",
            [application_name],
        )
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.fixture
def holder(worker_env, host, db):
    """Start another process holding the host's one slot in a long statement; its
    Popen and its backend's pid once the statement runs. Both are ended afterwards."""
    name = f"slot-holder-{uuid.uuid4().hex[:8]}"
    env = {**worker_env, **host, "NOTIFY_CAMPAIGN_DB_CONCURRENCY": "1", "PGAPPNAME": name}
    run = statement_process(env, 60)
    try:
        run.stdin.write("go\n")
        run.stdin.flush()
        pid = wait_for(lambda: backend_sleeping(name), timeout=30, what="the holder's statement")
        yield run, pid
    finally:
        run.kill()
        run.wait()
        with connection.cursor() as cursor:  # its statement would run on for a minute
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [name],
            )


def test_a_slot_held_past_the_wait_lets_the_statement_run_without_one(holder, settings):
    settings.NOTIFY_CAMPAIGN_DB_CONCURRENCY = 1
    _, pid = holder
    campaign_statements.campaign_statements_limited()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 42")  # waits its 0.5 s for the slot, then runs
        assert cursor.fetchone() == (42,)
    campaign_statements.campaign_statements_free()
    assert backend_running_pid(pid)  # the holder had not finished: ours did not wait for it


# Far below the holder's minute, far above a statement's time on a loaded machine.
QUICK = 10


def slot_held_elsewhere(host: dict[str, str]) -> bool:
    """Whether another process holds the host's first campaign statement slot."""
    path = Path(host["NOTIFY_CAMPAIGN_DB_LOCK_DIR"]) / (
        f"notify-campaign-db-{host['NOTIFY_CAMPAIGN_YIELD_SCOPE']}-0.lock"
    )
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing frees the lock if it was ours
    return False


def backend_running_pid(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active'", [pid])
        return cursor.fetchone() is not None


def test_after_a_campaign_task_the_threads_statements_take_no_slot(holder, host, settings):
    from config.celery import _campaign_turn_back, _campaign_work_yields_to_high

    settings.NOTIFY_CAMPAIGN_DB_CONCURRENCY = 1
    # Longer than the holder's minute: a statement that queued would take that minute.
    settings.NOTIFY_CAMPAIGN_DB_WAIT = 600
    settings.NOTIFY_CAMPAIGN_YIELD_WINDOW = 0
    low = SimpleNamespace(request=SimpleNamespace(delivery_info={"routing_key": "low"}))
    _campaign_work_yields_to_high(task=low)
    assert campaign_statements._campaign_statement in connection.execute_wrappers
    _campaign_turn_back(task=low)
    started = time.monotonic()
    with connection.cursor() as cursor:  # the next task on this thread: a login code's
        cursor.execute("SELECT 42")
        assert cursor.fetchone() == (42,)
    assert time.monotonic() - started < QUICK  # it did not queue for the held slot
    assert slot_held_elsewhere(host)


def test_a_rounds_announcement_writes_without_waiting_for_a_slot(holder, host, settings):
    settings.NOTIFY_CAMPAIGN_DB_CONCURRENCY = 1
    # Longer than the holder's minute: a statement that queued would take that minute.
    settings.NOTIFY_CAMPAIGN_DB_WAIT = 600
    campaign_statements.campaign_statements_limited()
    started = time.monotonic()
    with campaign_statements.statements_unslotted(), connection.cursor() as cursor:
        cursor.execute("SELECT 42")  # the events' append, in the round's transaction
        assert cursor.fetchone() == (42,)
    assert time.monotonic() - started < QUICK  # it did not queue for the held slot
    assert not getattr(campaign_statements._unslotted, "on", False)  # only inside
    campaign_statements.campaign_statements_free()
    assert slot_held_elsewhere(host)


def test_while_a_login_code_is_in_flight_the_announcements_appends_take_slots_too(holder, settings):
    settings.NOTIFY_CAMPAIGN_DB_CONCURRENCY = 1
    settings.NOTIFY_CAMPAIGN_DB_WAIT = 0.5
    settings.NOTIFY_CAMPAIGN_YIELD_WINDOW = 0.2  # the production default (the tests' is 0)
    priority.high_work_mark()
    get_redis_connection("default").pexpire(priority.busy_key(), 60_000)  # a long one
    campaign_statements.campaign_statements_limited()
    started = time.monotonic()
    with campaign_statements.statements_unslotted(), connection.cursor() as cursor:
        cursor.execute("SELECT 42")  # waits its 0.5 s for the slot, then runs
    waited = time.monotonic() - started
    campaign_statements.campaign_statements_free()
    assert waited >= 0.5  # it queued for the held slot, as any campaign statement


def test_a_holder_killed_mid_statement_frees_its_slot(holder, settings):
    settings.NOTIFY_CAMPAIGN_DB_CONCURRENCY = 1
    run, pid = holder
    usable = lambda: 1  # noqa: E731
    assert campaign_statements._slots.take(1, until=time.monotonic() + 0.2, usable=usable) is None
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert backend_running_pid(pid)  # its statement still runs on the database...
    slot = campaign_statements._slots.take(1, until=time.monotonic() + 20, usable=usable)
    assert slot is not None and slot[1] is not None  # ...but the slot is the host's again
    campaign_statements._slots.give_back(*slot)


@pytest.mark.e2e
def test_a_campaign_waits_for_a_slot_while_a_login_code_goes_through(
    api, promo_data, pipeline, workers_with, host
):
    smtp = pipeline
    # One worker serves both queues, threads as in production: a thread that ran a
    # campaign task may run the login code's next.
    workers_with(
        pool="threads",
        concurrency=4,
        NOTIFY_CAMPAIGN_DB_CONCURRENCY="1",
        NOTIFY_CAMPAIGN_DB_WAIT="60",
        **host,
    )
    members = [r.user_id for r in seed_recipients(3, prefix="slot")]
    Recipient.objects.create(user_id="slot-code", email="slot-code@example.com", locale="en")

    lock_file = Path(host["NOTIFY_CAMPAIGN_DB_LOCK_DIR"]) / (
        f"notify-campaign-db-{host['NOTIFY_CAMPAIGN_YIELD_SCOPE']}-0.lock"
    )
    held = os.open(lock_file, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # another low process's statement, as it were
    try:
        body = campaign_body(name="Held", audience={"user_ids": members})
        response = api.post("/v1/campaigns", body, format="json")
        assert response.status_code == 202, response.content
        campaign_id = response.json()["campaign_id"]
        code = api.post(
            "/v1/notifications",
            {
                "event_id": "slot-code-1",
                "user_id": "slot-code",
                "category": "security.login_code",
                "channels": ["email"],
                "payload": {"code": "123456"},
            },
            format="json",
        )
        assert code.status_code == 202, code.content
        wait_for(
            lambda: Delivery.objects.filter(
                notification__event_id="slot-code-1", status="delivered"
            ).exists(),
            what="the login code delivered while the campaign's slot is held",
        )
        # The fan-out's statements wait for the slot: nothing of the campaign yet.
        assert Campaign.objects.get(pk=campaign_id).created_count == 0
        assert not Notification.objects.filter(event_id__startswith=f"campaign:{campaign_id}:")
        assert [m.rcpt_tos for m in smtp.received] == [["slot-code@example.com"]]
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
    wait_for(lambda: len(smtp.received) == 4, what="the campaign's emails once the slot is free")
