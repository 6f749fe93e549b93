"""Probes an orchestrator and an operator rely on: /healthz and /readyz."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client, override_settings

from tests.ops.conftest import closed_port

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
        assert "redis" in body["errors"]

        accepted = api.post(
            "/v1/notifications",
            {"event_id": "redis-down-1", "user_id": "rd1", "category": "order.shipped",
             "payload": ORDER, "channels": ["inapp"]},
            format="json",
        )  # fmt: skip
        assert accepted.status_code == 202, accepted.content


@pytest.mark.django_db
def test_readyz_names_the_broker_when_rabbitmq_cannot_be_reached():
    unreachable = f"amqp://guest:guest@127.0.0.1:{closed_port()}//"
    with override_settings(CELERY_BROKER_URL=unreachable):
        response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["down"] == ["broker"]
