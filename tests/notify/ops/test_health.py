"""Probes an orchestrator and an operator rely on: /healthz and /readyz."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import Client, override_settings

from tests.deliveries.ops.conftest import closed_port
from tests.processes import ROOT

ORDER = {"order_number": "R-1", "delivery_date": "2026-12-03", "items_count": 1}


def redis_at_closed_port() -> dict:
    """CACHES pointing at a port where nothing listens: a real refused connection."""
    caches = {"default": {**settings.CACHES["default"]}}
    caches["default"]["LOCATION"] = f"redis://127.0.0.1:{closed_port()}/0"
    return {"CACHES": caches, "REDIS_URL": caches["default"]["LOCATION"]}


def test_healthz_answers_ok_without_touching_any_dependency():
    # No database fixture: a query here would fail the test.
    with override_settings(**redis_at_closed_port()):
        response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ok_when_every_dependency_answers(db, broker):
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"] == {"database": "ok", "broker": "ok", "redis": "ok"}
    assert body["down"] == []


def test_readyz_names_redis_when_it_is_down_and_the_api_still_accepts_events(db, api):
    api.put("/v1/users/rd1", {"email": "rd1@example.com"}, format="json")
    with override_settings(**redis_at_closed_port()):
        response = Client().get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["down"] == ["redis"]
        assert body["checks"]["redis"] == "down"
        assert body["checks"]["database"] == "ok"
        # Named, never explained: no error text, host or port reaches the caller.
        assert set(body) == {"status", "checks", "down"}
        port = settings.CACHES["default"]["LOCATION"].rsplit(":", 1)[1].split("/")[0]
        assert port not in response.content.decode()
        assert "Error" not in response.content.decode()

        accepted = api.post(
            "/v1/notifications",
            {
                "event_id": "redis-down-1",
                "user_id": "rd1",
                "category": "order.shipped",
                "payload": ORDER,
                "channels": ["inapp"],
            },
            format="json",
        )
        assert accepted.status_code == 202, accepted.content


@pytest.mark.django_db
def test_readyz_names_the_broker_when_rabbitmq_cannot_be_reached():
    unreachable = f"amqp://guest:guest@127.0.0.1:{closed_port()}//"
    with override_settings(CELERY_BROKER_URL=unreachable):
        response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["down"] == ["broker"]
    assert "guest" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_and_queue_depths_reach_the_last_node_of_a_broker_list(broker):
    """A cluster's list with its first two nodes down: the probe and /metrics' queue
    depths go on to the third, which answers."""
    from deliveries.ops.selectors import queue_depths

    down = [f"amqp://guest:guest@127.0.0.1:{closed_port()}//" for _ in range(2)]
    with override_settings(CELERY_BROKER_URL=";".join([*down, settings.CELERY_BROKER_URL])):
        response = Client().get("/readyz")
        depths = queue_depths()
    assert response.status_code == 200, response.content
    assert response.json()["checks"]["broker"] == "ok"
    assert set(depths) == {queue.name for queue in settings.CELERY_TASK_QUEUES}


# Run in a child process: the database connection (and its pool) is made at start from
# DATABASE_URL, so pointing it at a closed port means starting Django anew.
_READYZ_IN_A_CHILD = """
import django, json
django.setup()
from django.test import Client
response = Client().get("/readyz")
print(json.dumps({"status": response.status_code, "body": response.content.decode()}))
"""


def test_readyz_names_the_database_when_postgresql_cannot_be_reached(worker_env):
    port = closed_port()
    env = {
        **worker_env,
        "DATABASE_URL": f"postgres://notify:s3cret-pw@127.0.0.1:{port}/notify",
        "DATABASE_POOL_TIMEOUT": "2",
    }
    child = subprocess.run(
        [sys.executable, "-c", _READYZ_IN_A_CHILD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    answer = json.loads(child.stdout.strip().splitlines()[-1])
    assert answer["status"] == 503
    body = json.loads(answer["body"])
    assert body["down"] == ["database"]
    assert body["checks"] == {"database": "down", "broker": "ok", "redis": "ok"}
    for secret in ("s3cret-pw", str(port), "notify:"):
        assert secret not in answer["body"]
