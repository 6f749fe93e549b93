"""A worker killed with SIGKILL mid-send and a RabbitMQ restart during a burst of 500:
every notification is delivered, none lost, at most one duplicate per kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from deliveries.models import Delivery
from notify.models import Notification
from tests.conftest import ARTIFACTS, ROOT
from tests.pressure.test_pressure_e2e import accept_many
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

FAST_RECOVERY = {
    "NOTIFY_SEND_CLAIM_TIMEOUT": "3",
    "NOTIFY_RETRY_SWEEP_INTERVAL": "1",
    "NOTIFY_RETRY_SWEEP_GRACE": "1",
    # Longer than the burst's backlog takes to drain: a send message still waiting its
    # turn in the queue is not lost, and republishing it every few seconds only filled
    # the queue with no-op duplicates ahead of the real work. A message that really is
    # lost is still republished well within the test's wait.
    "NOTIFY_RETRY_RESWEEP_AFTER": "30",
    "NOTIFY_RATE_SMTP": "1000:1000",
}


@pytest.fixture
def beat(worker_env, tmp_path):
    """A real `celery beat`, running the sweepers every second."""
    log = open(ARTIFACTS / "beat-faults.log", "ab")  # noqa: SIM115 - the child's for its life
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "-l",
            "INFO",
            "-s",
            str(tmp_path / "beat-schedule"),
        ],
        cwd=ROOT,
        env={**worker_env, **FAST_RECOVERY},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    process.terminate()
    process.wait(timeout=15)


def rabbitmq_restart() -> None:
    """Stop and start the broker application (queues and persistent messages survive)."""
    subprocess.run(["rabbitmqctl", "stop_app"], check=True, capture_output=True, timeout=60)
    subprocess.run(["rabbitmqctl", "start_app"], check=True, capture_output=True, timeout=60)
    subprocess.run(["rabbitmqctl", "await_startup"], check=True, capture_output=True, timeout=60)


def pipeline_state(smtp) -> str:
    """What was left where, for a failure's message."""
    statuses = Counter(Delivery.objects.filter(channel="email").values_list("status", flat=True))
    routed = Notification.objects.filter(deliveries__isnull=False).distinct().count()
    return (
        f"email deliveries by status {dict(statuses)}, notifications {Notification.objects.count()}"
        f" ({routed} routed), emails received {len(smtp.received)}"
    )


def pool_children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(line) for line in found.stdout.split()]


@pytest.mark.alone  # it stops the machine's RabbitMQ, which every other test uses
def test_kill_9_and_a_broker_restart_lose_nothing(workers_with, pipeline, demo_data, beat):
    smtp = pipeline
    smtp.handler.data_delay = 0.01  # sends take a moment, so a kill lands mid-send
    workers = workers_with(count=2, **FAST_RECOVERY)

    accept_many(250, prefix="burst-a")
    wait_for(lambda: len(smtp.received) >= 60, timeout=60, what="the burst to be under way")
    victim = pool_children(workers[0].process.pid)[0]
    os.kill(victim, signal.SIGKILL)  # one pool process dies in the middle of its work
    kills = 1

    wait_for(lambda: len(smtp.received) >= 120, timeout=60, what="sending to go on")
    rabbitmq_restart()
    # The rest of the burst arrives while workers and beat reconnect.
    accept_many(250, prefix="burst-b")

    def all_delivered():
        return Delivery.objects.filter(channel="email", status="delivered").count() == 500

    try:
        wait_for(all_delivered, timeout=180, what="all 500 delivered")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; {pipeline_state(smtp)}") from None
    time.sleep(2)  # room for a late duplicate to show up
    per_address = Counter(mail.rcpt_tos[0] for mail in smtp.received)
    assert len(per_address) == 500  # none lost
    duplicates = sum(count - 1 for count in per_address.values())
    assert duplicates <= kills, per_address.most_common(3)
    assert not Delivery.objects.exclude(status="delivered").filter(channel="email").exists()
