"""A worker killed with SIGKILL mid-send and a RabbitMQ restart during a burst of 500:
every notification is delivered, none lost, at most one duplicate per kill.

The broker restarted is a node of the test's own (scripts/rabbit_cluster.py, one node),
not the machine's: every other test process uses that one, and it is left as it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest

from deliveries.models import Delivery
from notify.models import Notification
from scripts.rabbit_cluster import RabbitCluster, RabbitNode
from tests.conftest import ARTIFACTS, ROOT, reset_provider_state, session_pipeline_stopped
from tests.pressure.test_pressure_e2e import accept_many
from tests.processes import RelayProcess, WorkerProcess, stop_children
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
def own_broker():
    """A RabbitMQ node of this test's own, booted (its default vhost and guest user)."""
    node = RabbitCluster(size=1)
    try:
        node.start()
        yield node.node(1)
    finally:
        node.stop()


@pytest.fixture
def deployment_env(own_broker, worker_env, transactional_db, smtp):
    """The processes' environment on the test's own broker. The suite's relay and worker
    stand aside meanwhile (they publish and consume on the machine's broker)."""
    reset_provider_state()
    with session_pipeline_stopped():
        yield {**worker_env, **FAST_RECOVERY, "CELERY_BROKER_URL": own_broker.url}


@pytest.fixture
def relay(deployment_env):
    process = RelayProcess(deployment_env)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def workers(deployment_env):
    """Two workers of every queue, started side by side."""
    started = [
        WorkerProcess(deployment_env, name=f"faults-{uuid.uuid4().hex[:6]}") for _ in range(2)
    ]
    try:
        for worker in started:
            worker.spawn()
        for worker in started:
            worker.wait_ready()
        yield started
    finally:
        stop_children([worker.process for worker in started])


@pytest.fixture
def beat(deployment_env, tmp_path):
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
        env=deployment_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    process.terminate()
    process.wait(timeout=15)


def rabbitmq_restart(node: RabbitNode) -> None:
    """Stop and start the broker application (queues and persistent messages survive)."""
    node.ctl("stop_app")
    node.ctl("start_app")
    node.ctl("await_startup")


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


# Alone: booting a broker node and draining 500 emails through a kill and a restart
# takes CPU that the main phase has none of, and the fairness test's drain leaves idle.
@pytest.mark.alone
def test_kill_9_and_a_broker_restart_lose_nothing(
    own_broker, smtp, demo_data, relay, workers, beat
):
    smtp.handler.data_delay = 0.01  # sends take a moment, so a kill lands mid-send

    accept_many(250, prefix="burst-a")
    wait_for(lambda: len(smtp.received) >= 60, timeout=60, what="the burst to be under way")
    victim = pool_children(workers[0].process.pid)[0]
    os.kill(victim, signal.SIGKILL)  # one pool process dies in the middle of its work
    kills = 1

    wait_for(lambda: len(smtp.received) >= 120, timeout=60, what="sending to go on")
    rabbitmq_restart(own_broker)
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
