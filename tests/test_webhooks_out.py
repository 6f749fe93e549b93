"""Status webhooks out, on real worker processes: a producer's loopback endpoint gets each
outcome once, Standard Webhooks signed, through a receiver outage; a private or metadata
address is never registered nor posted to; an endpoint that keeps failing is disabled
with the reason and posts what waited once re-enabled."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client
from standardwebhooks.webhooks import Webhook

from deliveries.models import (
    WebhookAttempt,
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventStatus,
)
from deliveries.webhooks.posting import event_post, webhook_retry_delay
from notify.models import Recipient
from tests.peers.webhooks import WebhookReceiver
from tests.waiting import wait_for

# Retries shortened (same shape: growing, jittered), and the rule that disables an
# endpoint: never within an outage the receiver comes back from, at the third failure
# in a row for one that does not.
QUICK = {"NOTIFY_WEBHOOK_RETRY_DELAYS": "0.2,0.4,0.8,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"}
PATIENT = {**QUICK, "NOTIFY_WEBHOOK_DISABLE_AFTER": "600"}
STRICT = {**QUICK, "NOTIFY_WEBHOOK_DISABLE_FAILURES": "3", "NOTIFY_WEBHOOK_DISABLE_AFTER": "0"}
COUNT = int(os.environ.get("NOTIFY_TEST_WEBHOOK_COUNT", "500"))


@pytest.fixture(scope="module")
def receiver_peer():
    peer = WebhookReceiver(int(os.environ["NOTIFY_TEST_WEBHOOK_PORT"]))
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture
def receiver(receiver_peer):
    receiver_peer.reset()
    yield receiver_peer
    receiver_peer.reset()


def register(api, url: str, event_types: list[str]):
    return api.post("/v1/webhooks", {"url": url, "event_types": event_types}, format="json")


def send_inapp(api, prefix: str, count: int) -> list[str]:
    """`count` order.shipped events on in-app only (delivered at routing), one batch."""
    Recipient.objects.bulk_create(
        [Recipient(user_id=f"{prefix}-{i}", locale="en") for i in range(count)]
    )
    events = [
        {
            "event_id": f"{prefix}-{uuid.uuid4()}",
            "user_id": f"{prefix}-{i}",
            "category": "order.shipped",
            "payload": {"order_number": f"W-{i}", "delivery_date": "2026-12-03",
                        "items_count": 1},
            "channels": ["inapp"],
        }
        for i in range(count)
    ]  # fmt: skip
    response = api.post("/v1/notifications/batch", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    answers = response.json()["results"]
    assert all(a["status"] == 202 for a in answers), answers[:3]
    return [a["notification_id"] for a in answers]


def test_each_delivery_is_posted_once_signed_through_a_receiver_outage(
    api, pipeline, workers_with, receiver
):
    created = register(api, receiver.url, ["delivery.delivered"])
    assert created.status_code == 201, created.content
    secret = created.json()["secret"]
    assert secret.startswith("whsec_")
    workers_with(**PATIENT)  # fresh processes: they see the subscription at once

    first = send_inapp(api, "wh-a", COUNT // 2)
    wait_for(lambda: len(receiver.accepted()) >= 50, what="the first posts")
    receiver.answer = 503  # down in the middle
    second = send_inapp(api, "wh-b", COUNT - COUNT // 2)
    time.sleep(1.5)
    receiver.answer = 204
    try:
        wait_for(lambda: len(receiver.accepted()) >= COUNT, timeout=120, what=f"{COUNT} posts")
    except AssertionError:
        from django.db.models import Count

        states = list(WebhookEvent.objects.values("status").annotate(n=Count("id")))
        pending = list(
            WebhookEvent.objects.exclude(status="delivered").values(
                "id", "status", "attempts", "next_attempt_at", "enqueued_at", "claimed_at"
            )[:5]
        )
        active = list(WebhookEndpoint.objects.values_list("active", "disabled_reason"))
        raise AssertionError(
            f"got {len(receiver.accepted())} of {len(receiver.received)}; {states}; "
            f"{active}; {pending}"
        ) from None
    time.sleep(0.5)  # nothing more arrives: no duplicates

    verifier = Webhook(secret)
    accepted = receiver.accepted()
    notifications = []
    for headers, body in accepted:
        lowered = {k.lower(): v for k, v in headers.items()}
        payload = verifier.verify(body, lowered)  # raises on a bad signature or timestamp
        assert payload["type"] == "delivery.delivered"
        assert payload["data"]["channel"] == "inapp"
        notifications.append(payload["data"]["notification_id"])
    assert len(accepted) == COUNT
    assert sorted(notifications) == sorted(first + second)  # each exactly once
    assert len({h["webhook-id"] for h, _ in accepted}) == COUNT
    assert any(status == 503 for status, _, _ in receiver.received)  # the outage was seen
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.active and endpoint.failures_in_row == 0
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.DELIVERED).count() == COUNT
    assert WebhookAttempt.objects.filter(ok=False).exists()


def test_an_endpoint_that_keeps_failing_is_disabled_with_the_reason_and_re_enabled(
    api, pipeline, workers_with, receiver, django_user_model
):
    receiver.answer = 500
    created = register(api, receiver.url, ["delivery.delivered", "notification.routed"])
    endpoint_id = created.json()["id"]
    workers_with(**STRICT)
    ids = send_inapp(api, "wh-c", 3)

    def disabled():
        endpoint = WebhookEndpoint.objects.get(pk=endpoint_id)
        return endpoint if not endpoint.active else None

    endpoint = wait_for(disabled, timeout=30, what="the endpoint disabled")
    assert "500" in endpoint.disabled_reason and "in a row" in endpoint.disabled_reason
    shown = api.get(f"/v1/webhooks/{endpoint_id}").json()
    assert shown["active"] is False and shown["disabled_reason"] == endpoint.disabled_reason
    # Its owner sees why in admin, with the attempts, and re-enables it there.
    admin = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client = Client()
    client.force_login(admin)
    page = client.get(f"/admin/deliveries/webhookendpoint/{endpoint_id}/change/")
    assert page.status_code == 200
    assert "in a row" in page.content.decode() and "500" in page.content.decode()
    tried = len(receiver.received)
    time.sleep(1.2)  # disabled: nothing is posted
    assert len(receiver.received) == tried

    receiver.answer = 204
    response = client.post(
        "/admin/deliveries/webhookendpoint/",
        {"action": "enable", "_selected_action": [endpoint_id]},
    )
    assert response.status_code == 302
    wait_for(lambda: len(receiver.accepted()) >= 6, what="what waited, posted")
    types = sorted(json.loads(body)["type"] for _, body in receiver.accepted())
    assert types == ["delivery.delivered"] * 3 + ["notification.routed"] * 3
    routed = {json.loads(b)["data"]["notification_id"] for _, b in receiver.accepted()}
    assert routed == set(ids)
    assert WebhookEndpoint.objects.get(pk=endpoint_id).active


@pytest.mark.parametrize(
    "url",
    [
        "https://169.254.169.254/latest/meta-data/",  # cloud metadata
        "https://10.1.2.3/hook",  # private
        "https://127.0.0.1:9/hook",  # loopback, not listed
        "https://[::1]/hook",
        "http://example.com/hook",  # not https
        "https://user:pw@example.com/hook",
    ],
)
def test_a_private_or_metadata_address_is_refused_at_registration(api, url):
    response = register(api, url, ["delivery.delivered"])
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] in {"endpoint_not_allowed", "invalid"}
    assert not WebhookEndpoint.objects.exists()


def test_a_private_address_is_never_posted_to_even_when_it_got_in(db, demo_data):
    """An endpoint written past the API (or whose DNS changed) is checked before each
    post: nothing connects to it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.3)
    connected = threading.Event()

    def accept() -> None:
        try:
            listener.accept()
            connected.set()
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    from notify.models import Producer

    producer = Producer.objects.create(name="sneaky")
    endpoint = WebhookEndpoint.objects.create(
        producer=producer,
        url=f"http://127.0.0.1:{listener.getsockname()[1]}/x",
        secret="whsec_" + "A" * 32,
    )
    event = WebhookEvent(
        endpoint=endpoint, msg_id="msg_x", event_type="delivery.delivered", payload={},
        next_attempt_at="2026-01-01T00:00:00Z", created_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    from django.utils import timezone

    result = event_post(event, now=timezone.now())
    thread.join()
    listener.close()
    assert not result.ok and result.status_code == "egress_refused"
    assert not connected.is_set()


def test_the_retry_schedule_lasts_more_than_a_day_and_is_jittered():
    from django.conf import settings

    delays = settings.NOTIFY_WEBHOOK_RETRY_DELAYS
    assert sum(delays) > 24 * 3600
    picks = {webhook_retry_delay(attempts=3, delays=delays, jitter=0.2) for _ in range(20)}
    assert len(picks) > 1 and all(0.8 * delays[2] <= p <= 1.2 * delays[2] for p in picks)
    assert webhook_retry_delay(attempts=len(delays) + 1, delays=delays, jitter=0.2) is None
