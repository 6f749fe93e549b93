"""The queue kind setting: what quorum queues change in the topology and in countdowns
(no broker needed; tests/cluster/test_broker_cluster.py runs them on a real cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from notify.broker import broker_countdown
from tests.processes import ROOT

TOPOLOGY = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({
    "exchange": settings.NOTIFY_EXCHANGE.type,
    "queues": {q.name: q.queue_arguments for q in settings.CELERY_TASK_QUEUES},
}))
"""


def topology(queue_type: str) -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "NOTIFY_QUEUE_TYPE": queue_type,
    }
    done = subprocess.run(
        [sys.executable, "-c", TOPOLOGY],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def test_quorum_queues_carry_no_priority_and_bound_redeliveries(settings):
    quorum = topology("quorum")
    assert quorum["exchange"] == "topic"  # native delayed delivery forwards by pattern
    for name in ("high", "medium", "low"):
        arguments = quorum["queues"][name]
        assert arguments["x-queue-type"] == "quorum"
        assert "x-max-priority" not in arguments  # RabbitMQ 3.10 refuses it on quorum queues
        assert arguments["x-delivery-limit"] == 5
        assert arguments["x-dead-letter-exchange"] == "dead_letter"
    assert "x-delivery-limit" not in quorum["queues"]["dead_letter"]

    # This process runs with the default kind: classic priority queues, direct exchange.
    assert settings.NOTIFY_EXCHANGE.type == "direct"
    medium = next(q for q in settings.CELERY_TASK_QUEUES if q.name == "medium")
    assert medium.queue_arguments["x-max-priority"] == 10
    assert "x-queue-type" not in medium.queue_arguments


def test_countdowns_are_whole_seconds_with_quorum_queues(settings):
    settings.NOTIFY_QUORUM_QUEUES = True
    assert broker_countdown(0.1) == 1.0  # under a second the broker's delay refuses it
    assert broker_countdown(1.2) == 2.0  # truncated it would come early
    assert broker_countdown(0) == 0
    assert broker_countdown(None) is None
    settings.NOTIFY_QUORUM_QUEUES = False
    assert broker_countdown(0.1) == 0.1


def test_several_broker_nodes_with_classic_queues_refuse_to_start():
    nodes = "amqp://guest:guest@127.0.0.1:5672//;amqp://guest:guest@127.0.0.1:5673//"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "CELERY_BROKER_URL": nodes}
    for queue_type, allowed, refused in (
        ("classic", "", True),
        ("classic", "1", False),
        ("quorum", "", False),
    ):
        done = subprocess.run(
            [sys.executable, "-c", "import django; django.setup()"],
            cwd=ROOT,
            env={
                **env,
                "NOTIFY_QUEUE_TYPE": queue_type,
                "NOTIFY_ALLOW_CLASSIC_QUEUES_ON_CLUSTER": allowed,
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode != 0) == refused, (queue_type, allowed, done.stderr[-500:])
        if refused:
            assert "NOTIFY_QUEUE_TYPE" in done.stderr and "several broker nodes" in done.stderr
