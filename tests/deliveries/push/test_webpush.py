"""Web Push end to end: API → worker → a real local push service that checks the VAPID
signature and decrypts what it gets, as a browser would."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from itertools import pairwise

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings

from deliveries.models import Device
from deliveries.pipeline.retry import push_backoff
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ORDER = {"order_number": "A-7", "delivery_date": "2026-12-03", "items_count": 1}


def vapid_public_key() -> str:
    key = load_pem_private_key(settings.WEBPUSH_VAPID_PRIVATE_KEY.encode(), password=None)
    raw = key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def register_user(api, user_id: str) -> None:
    response = api.put(f"/v1/users/{user_id}", {"locale": "en"}, format="json")
    assert response.status_code in (200, 201), response.content


def register_device(api, user_id: str, body: dict) -> int:
    response = api.post(f"/v1/users/{user_id}/devices", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["device_id"]


def send_order(api, user_id: str, payload: dict | None = None, **extra) -> str:
    body = {
        "event_id": str(uuid.uuid4()),
        "user_id": user_id,
        "category": "order.shipped",
        "payload": payload or ORDER,
        "channels": ["webpush"],
        **extra,
    }
    response = api.post("/v1/notifications", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()["notification_id"]


def push_status(api, notification_id: str, *, final: bool = True) -> dict | None:
    deliveries = api.get(f"/v1/notifications/{notification_id}/status").json()["deliveries"]
    found = [d for d in deliveries if d["channel"] == "webpush"]
    if not found:
        return None
    if final and found[0]["status"] in ("queued", "sending", "retrying"):
        return None
    return found[0]


def settled(api, notification_id: str, timeout: float = 20.0) -> dict:
    return wait_for(
        lambda: push_status(api, notification_id),
        timeout=timeout,
        what=f"the webpush delivery of {notification_id} to settle",
    )


def test_browser_gets_the_rendered_push_signed_with_our_vapid_key(api, pipeline, push_service):
    register_user(api, "wp-1")
    _, body = push_service.subscribe("alice-laptop")
    device_id = register_device(api, "wp-1", body)

    notification_id = send_order(api, "wp-1")
    status = settled(api, notification_id)

    assert status["status"] == "delivered"
    assert status["target"] == str(device_id)
    [push] = push_service.accepted_for("alice-laptop")
    assert push.json() == {
        "notification_id": notification_id,
        "category": "order.shipped",
        "title": "Order A-7 shipped",
        "body": "Expected delivery: 2026-12-03",
        "url": "/orders/A-7",
    }
    assert push.vapid_key == vapid_public_key()
    assert push.claims["aud"] == push_service.origin
    assert push.claims["sub"] == settings.WEBPUSH_VAPID_SUBJECT
    assert push.headers["urgency"] == "normal"
    assert 0 < int(push.headers["ttl"]) <= 24 * 3600


def test_registering_the_same_browser_again_keeps_one_device_and_one_push(
    api, pipeline, push_service
):
    register_user(api, "wp-2")
    _, body = push_service.subscribe("bob-phone")
    first = register_device(api, "wp-2", body)
    again = register_device(api, "wp-2", body)
    _, renewed = push_service.subscribe("bob-phone-renewed")
    moved = register_device(api, "wp-2", {**renewed, "previous": body["endpoint"]})
    assert first == again == moved

    notification_id = send_order(api, "wp-2")
    assert settled(api, notification_id)["status"] == "delivered"
    assert len(push_service.accepted_for("bob-phone-renewed")) == 1
    assert push_service.deliveries_to("bob-phone") == []


def test_a_gone_subscription_410_fails_the_push_and_deactivates_the_device(
    api, pipeline, push_service
):
    register_user(api, "wp-3")
    _, body = push_service.subscribe("old-browser")
    device_id = register_device(api, "wp-3", body)
    push_service.answer("old-browser", (410, {}))

    status = settled(api, send_order(api, "wp-3"))
    assert (status["status"], status["reason"], status["attempts"]) == ("failed", "rejected", 1)
    assert Device.objects.get(pk=device_id).active is False

    # The next notification does not even try the dead device.
    later = settled(api, send_order(api, "wp-3"))
    assert (later["status"], later["reason"]) == ("suppressed", "no_address")
    assert len(push_service.deliveries_to("old-browser")) == 1


def test_push_service_asking_to_retry_after_2s_is_not_called_sooner(api, pipeline, push_service):
    register_user(api, "wp-4")
    _, body = push_service.subscribe("busy")
    register_device(api, "wp-4", body)
    push_service.answer("busy", (429, {"Retry-After": "2"}))

    status = settled(api, send_order(api, "wp-4"))
    assert (status["status"], status["attempts"]) == ("delivered", 2)
    first, second = push_service.deliveries_to("busy")
    assert first.status == 429
    assert second.at - first.at >= 2.0


def test_push_service_down_503_is_retried_with_growing_delays(api, pipeline, push_service):
    register_user(api, "wp-5")
    _, body = push_service.subscribe("flaky")
    register_device(api, "wp-5", body)
    push_service.answer("flaky", (503, {}), (503, {}), (503, {}))

    status = settled(api, send_order(api, "wp-5"))
    assert (status["status"], status["attempts"]) == ("delivered", 4)
    times = [r.at for r in push_service.deliveries_to("flaky")]
    gaps = [later - earlier for earlier, later in pairwise(times)]
    # Each wait is at least its planned delay less the jitter (doubling: 0.3, 0.6, 1.2 s
    # here), never shorter. A retry may come late on a loaded machine (half a second was
    # seen), so neighbouring gaps are not compared; the first and the last are, as their
    # plans lie four times apart.
    planned = [push_backoff(attempt) * (1 - settings.NOTIFY_RETRY_JITTER) for attempt in (1, 2, 3)]
    assert all(gap >= floor for gap, floor in zip(gaps, planned, strict=True)), (gaps, planned)
    assert gaps[0] < gaps[-1], gaps


def test_device_that_re_registers_while_waiting_gets_the_retry_at_its_new_endpoint(
    api, pipeline, push_service
):
    register_user(api, "wp-6")
    _, body = push_service.subscribe("rotating-old")
    device_id = register_device(api, "wp-6", body)
    # 503 with a short Retry-After, so the browser has time to re-subscribe.
    push_service.answer("rotating-old", (503, {"Retry-After": "2"}))

    notification_id = send_order(api, "wp-6")
    wait_for(lambda: push_service.deliveries_to("rotating-old"), what="the first attempt")
    _, renewed = push_service.subscribe("rotating-new")
    assert register_device(api, "wp-6", {**renewed, "previous": body["endpoint"]}) == device_id

    status = settled(api, notification_id)
    assert (status["status"], status["attempts"]) == ("delivered", 2)
    assert len(push_service.accepted_for("rotating-new")) == 1
    assert [r.status for r in push_service.deliveries_to("rotating-old")] == [503]


def test_push_that_outlives_its_ttl_ends_expired_and_is_not_sent_late(api, pipeline, push_service):
    register_user(api, "wp-7")
    _, body = push_service.subscribe("down")
    register_device(api, "wp-7", body)
    push_service.answer("down", *[(503, {})] * 50)

    notification_id = send_order(api, "wp-7", ttl_seconds=3)
    status = settled(api, notification_id)

    assert (status["status"], status["reason"]) == ("expired", "deadline_passed")
    created = api.get(f"/v1/notifications/{notification_id}/status").json()["created_at"]
    deadline = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() + 3
    attempts = push_service.deliveries_to("down")
    assert attempts, "the push was tried while it was still useful"
    assert all(r.at <= deadline for r in attempts)
    assert all(r.status == 503 for r in attempts)


def test_a_recipient_with_many_slow_devices_gets_at_most_four_push_jobs_and_others_still_get_theirs(
    api, pipeline, push_service
):
    from flow.fairness import push_drops_total

    register_user(api, "wp-many")
    register_user(api, "wp-one")
    push_service.slow["many"] = 1.5
    for number in range(10):
        _, body = push_service.subscribe(f"many.device{number}")
        register_device(api, "wp-many", body)
    _, body = push_service.subscribe("one.phone")
    register_device(api, "wp-one", body)
    drops_before = push_drops_total()

    crowded = send_order(api, "wp-many")
    healthy = send_order(api, "wp-one")

    assert settled(api, healthy)["status"] == "delivered"

    def all_settled():
        rows = api.get(f"/v1/notifications/{crowded}/status").json()["deliveries"]
        pushes = [d for d in rows if d["channel"] == "webpush"]
        done = len(pushes) == 10 and all(
            d["status"] not in ("queued", "sending", "retrying") for d in pushes
        )
        return pushes if done else None

    pushes = wait_for(all_settled, timeout=30, what="the crowded recipient's pushes")
    outcomes = sorted((d["status"], d["reason"]) for d in pushes)
    assert outcomes == [("delivered", "")] * 4 + [("suppressed", "push_limit")] * 6
    assert push_service.most_in_flight["many"] <= 4
    assert push_drops_total() - drops_before == 6


def test_a_push_too_big_for_one_encrypted_record_fails_as_a_render_error_unsent(
    api, pipeline, push_service
):
    register_user(api, "wp-8")
    _, body = push_service.subscribe("small")
    register_device(api, "wp-8", body)
    huge = {**ORDER, "order_number": "X" * 4000}

    status = settled(api, send_order(api, "wp-8", payload=huge))

    assert (status["status"], status["reason"]) == ("failed", "render_error")
    assert push_service.deliveries_to("small") == []
