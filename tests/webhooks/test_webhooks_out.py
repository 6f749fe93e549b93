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

from notify.models import Recipient
from tests.waiting import wait_for
from webhooks.models import (
    WebhookAttempt,
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventStatus,
)
from webhooks.posting import event_post, webhook_retry_delay

# Retries shortened (same shape: growing, jittered), and an endpoint disabled at the third
# failure in a row.
QUICK = {"NOTIFY_WEBHOOK_RETRY_DELAYS": "0.2,0.4,0.8,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"}
STRICT = {**QUICK, "NOTIFY_WEBHOOK_DISABLE_FAILURES": "3", "NOTIFY_WEBHOOK_DISABLE_AFTER": "0"}
# The outage test runs the shipped retry schedule (5 s, 5 min, 30 min, …) and the
# shipped disabling rule OUTAGE_SPEEDUP times faster, and the receiver is down for a
# minute of that time. Trade-off: a literal minute with the shipped steps would take over
# five minutes of wall time (an event that failed at the start of the outage fails again
# at 5 s and is next tried at 5 min); 50 times faster the outage and that wait take ~7 s,
# and the outage stands to every step of the schedule as a minute does in production:
# it outlasts the first retry, and the events it caught wait for the second.
OUTAGE_SPEEDUP = 50
COUNT = int(os.environ.get("NOTIFY_TEST_WEBHOOK_COUNT", "500"))


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
            "payload": {"order_number": f"W-{i}", "delivery_date": "2026-12-03", "items_count": 1},
            "channels": ["inapp"],
        }
        for i in range(count)
    ]
    response = api.post("/v1/notifications/batch", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    answers = response.json()["results"]
    assert all(a["status"] == 202 for a in answers), answers[:3]
    return [a["notification_id"] for a in answers]


def shipped_schedule_sped_up(speedup: float) -> dict[str, str]:
    """The shipped retry delays and disabling period (this process's settings, which the
    tests leave as shipped), each divided by `speedup`, as worker environment."""
    from django.conf import settings

    delays = ",".join(f"{delay / speedup:g}" for delay in settings.NOTIFY_WEBHOOK_RETRY_DELAYS)
    return {
        "NOTIFY_WEBHOOK_RETRY_DELAYS": delays,
        "NOTIFY_WEBHOOK_DISABLE_AFTER": f"{settings.NOTIFY_WEBHOOK_DISABLE_AFTER / speedup:g}",
    }


def test_each_delivery_is_posted_once_signed_through_a_receiver_outage(
    api, pipeline, workers_with, receiver
):
    from django.conf import settings

    outage_seconds = 60 / OUTAGE_SPEEDUP  # one minute of production time
    # What makes it a minute: the first retry comes during it, the second after it.
    first_retry, second_retry = settings.NOTIFY_WEBHOOK_RETRY_DELAYS[:2]
    assert first_retry < 60 < first_retry + second_retry
    created = register(api, receiver.url, ["delivery.delivered"])
    assert created.status_code == 201, created.content
    secret = created.json()["secret"]
    assert secret.startswith("whsec_")
    # Fresh processes: they see the subscription at once.
    workers_with(**shipped_schedule_sped_up(OUTAGE_SPEEDUP))

    first = send_inapp(api, "wh-a", COUNT // 2)
    wait_for(lambda: len(receiver.accepted()) >= 50, what="the first posts")
    receiver.answer = 503  # down in the middle
    down_at = time.monotonic()
    second = send_inapp(api, "wh-b", COUNT - COUNT // 2)
    # The minute counts from going down. Taking the second half in may alone last longer
    # on a slow box: the outage is then longer. Anything shorter than the second step
    # (5 min; 6 s here) still ends before the second retry, so it costs no more time.
    time.sleep(max(0.0, down_at + outage_seconds - time.monotonic()))
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
    # Every event the down receiver refused came again after the outage, and once.
    refused = {h["webhook-id"] for status, h, _ in receiver.received if status == 503}
    assert refused  # the outage was seen
    assert refused <= {h["webhook-id"] for h, _ in accepted}
    # Some waited through the outage on the schedule's second step, as a minute makes them.
    assert WebhookEvent.objects.filter(attempts__gte=3).exists()
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
    page = client.get(f"/admin/webhooks/webhookendpoint/{endpoint_id}/change/")
    assert page.status_code == 200
    assert "in a row" in page.content.decode() and "500" in page.content.decode()
    tried = len(receiver.received)
    time.sleep(1.2)  # disabled: nothing is posted
    assert len(receiver.received) == tried

    receiver.answer = 204
    response = client.post(
        "/admin/webhooks/webhookendpoint/",
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
    assert response.status_code in (400, 422), response.content  # malformed, or refused
    assert response.json()["error"]["code"] in {"endpoint_not_allowed", "invalid"}
    if response.status_code == 422:
        assert response.json()["error"]["field"] == "url"
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
        endpoint=endpoint,
        msg_id="msg_x",
        event_type="delivery.delivered",
        payload={},
        next_attempt_at="2026-01-01T00:00:00Z",
        created_at="2026-01-01T00:00:00Z",
    )
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


def _accepted(producer_name: str, user_id: str, channels: list[str]):
    from notify.models import Category, Notification, Producer
    from notify.services import notification_accept

    result = notification_accept(
        producer=Producer.objects.get_or_create(name=producer_name)[0],
        event_id=str(uuid.uuid4()),
        user_id=user_id,
        category=Category.objects.get(key="order.shipped"),
        payload={"order_number": "R-1", "delivery_date": "2026-12-03", "items_count": 1},
        channels=channels,
        ttl_seconds=None,
    )
    return Notification.objects.get(pk=result.notification_id)


def test_routing_tells_subscribers_what_was_routed_suppressed_and_delivered(api):
    from deliveries.pipeline.routing import notification_route

    types = ["notification.routed", "delivery.suppressed", "delivery.delivered"]
    assert register(api, "https://hooks.example/shop", types).status_code == 201
    other = _other_producer_api("elsewhere", scopes=["notifications:send", "webhooks:write"])
    assert register(other, "https://hooks.example/else", types).status_code == 201
    Recipient.objects.create(user_id="no-mail", locale="en")  # email: no address
    notification = _accepted("shop", "no-mail", ["inapp", "email"])
    notification_route(notification_id=notification.pk)

    events = {e.event_type: e.payload for e in WebhookEvent.objects.all()}
    assert sorted(events) == sorted(types)  # one each, and none for the other producer
    assert WebhookEvent.objects.filter(endpoint__url__endswith="/shop").count() == 3
    routed = events["notification.routed"]["data"]
    assert routed["notification_id"] == str(notification.pk) and routed["user_id"] == "no-mail"
    assert {d["channel"]: d["status"] for d in routed["deliveries"]}["email"] == "suppressed"
    assert events["delivery.suppressed"]["data"]["reason"] == "no_address"
    assert events["delivery.delivered"]["data"]["channel"] == "inapp"


def _other_producer_api(name: str, scopes: list[str] | None = None):
    from rest_framework.test import APIClient

    from notify.api_keys import api_key_issue

    client = APIClient()
    key = api_key_issue(producer_name=name, scopes=scopes)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key.key}")
    return client


def test_endpoints_need_the_webhooks_scope_and_stay_their_producers(api):
    narrow = _other_producer_api("narrow", scopes=["notifications:send"])
    refused = register(narrow, "https://hooks.example/n", ["delivery.delivered"])
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "missing_scope"
    allowed = _other_producer_api("hooked", scopes=["webhooks:write"])
    created = register(allowed, "https://hooks.example/h", ["delivery.delivered"])
    assert created.status_code == 201
    webhook_id = created.json()["id"]
    assert api.get(f"/v1/webhooks/{webhook_id}").status_code == 404  # another producer's
    assert api.delete(f"/v1/webhooks/{webhook_id}").status_code == 404
    assert api.get("/v1/webhooks").json() == {"results": []}
    changed = allowed.patch(
        f"/v1/webhooks/{webhook_id}",
        {"event_types": ["delivery.failed", "delivery.delivered"]},
        format="json",
    )
    assert changed.json()["event_types"] == ["delivery.delivered", "delivery.failed"]
    moved = allowed.patch(
        f"/v1/webhooks/{webhook_id}", {"url": "https://10.0.0.1/x"}, format="json"
    )
    assert moved.status_code == 422  # a new URL passes the egress check too
    assert allowed.delete(f"/v1/webhooks/{webhook_id}").status_code == 204
    assert not WebhookEndpoint.objects.exists()


def test_a_rotated_secret_signs_beside_the_new_one_until_its_overlap_ends(api):
    from django.utils import timezone

    from webhooks.posting import endpoint_secrets
    from webhooks.signing import signed_headers

    created = register(api, "https://hooks.example/r", ["delivery.delivered"]).json()
    rotated = api.post(f"/v1/webhooks/{created['id']}/rotate-secret").json()
    old, new = created["secret"], rotated["secret"]
    assert old != new and new.startswith("whsec_")
    endpoint = WebhookEndpoint.objects.get()
    body = b'{"type":"delivery.delivered"}'
    headers = signed_headers(
        secrets_live=endpoint_secrets(endpoint, now=timezone.now()),
        msg_id="msg_rot",
        timestamp=int(time.time()),
        body=body,
    )
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):  # the receiver may hold either while it switches
        Webhook(secret).verify(body, headers)
    later = timezone.now() + timezone.timedelta(days=2)
    assert endpoint_secrets(endpoint, now=later) == [new]


def test_a_round_nobody_subscribes_to_runs_no_statement(db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from webhooks.events import (
        subscribed_event_types,
        subscription_cache_clear,
        webhook_events_write,
    )

    # Warm, as in a running worker, and read from this test's database (an earlier test
    # in this process may have left a subscription in the cache).
    subscription_cache_clear()
    subscribed_event_types()
    with CaptureQueriesContext(connection) as queries:
        written = webhook_events_write(
            deliveries=[(1, timezone.now(), "delivered"), (2, timezone.now(), "reached")],
            notifications=[(uuid.uuid4(), None)],
            news=[(3, timezone.now(), "delivery.opened")],
        )
    assert written == 0 and len(queries) == 0


def test_erasure_removes_the_persons_webhook_events(api):
    from campaigns.erasure import person_erase
    from deliveries.pipeline.routing import notification_route

    register(api, "https://hooks.example/e", ["notification.routed", "delivery.delivered"])
    for user in ("gone", "stays"):
        Recipient.objects.create(user_id=user, locale="en")
        notification_route(notification_id=_accepted("shop", user, ["inapp"]).pk)
    assert WebhookEvent.objects.count() == 4
    person_erase(user_id="gone", via="test", requested_by="test")
    left = {e.payload["data"]["user_id"] for e in WebhookEvent.objects.all()}
    assert left == {"stays"} and WebhookEvent.objects.count() == 2


def test_the_sweep_requeues_due_events_whose_message_was_lost(api):
    from django.utils import timezone

    from webhooks.posting import webhook_events_sweep

    register(api, "https://hooks.example/s", ["delivery.delivered"])
    endpoint = WebhookEndpoint.objects.get()
    now = timezone.now()
    past = now - timezone.timedelta(hours=1)
    recent = now - timezone.timedelta(seconds=1)  # published within the grace
    for msg, enqueued in (("lost", None), ("stale", past), ("on-its-way", recent)):
        WebhookEvent.objects.create(
            endpoint=endpoint,
            msg_id=f"msg_{msg}",
            event_type="delivery.delivered",
            payload={},
            next_attempt_at=past,
            enqueued_at=enqueued,
            created_at=past,
        )
    assert webhook_events_sweep(now=now) == 2
    assert set(WebhookEvent.objects.filter(enqueued_at=now).values_list("msg_id", flat=True)) == {
        "msg_lost",
        "msg_stale",
    }


def test_a_deferred_delivery_that_expires_at_release_is_reported_failed(api):
    from django.utils import timezone

    from deliveries.models import Delivery, DeliveryStatus
    from deliveries.pipeline.release import deferred_release
    from deliveries.pipeline.routing import notification_route

    register(api, "https://hooks.example/q", ["delivery.failed"])
    Recipient.objects.create(user_id="quiet", email="quiet@example.com", locale="en")
    notification = _accepted("shop", "quiet", ["email"])
    notification_route(notification_id=notification.pk)
    past = timezone.now() - timezone.timedelta(minutes=1)
    Delivery.objects.filter(notification=notification).update(
        status=DeliveryStatus.DEFERRED, next_attempt_at=past, deadline=past
    )  # as if quiet hours outlasted its TTL
    deferred_release()
    [event] = WebhookEvent.objects.all()
    assert event.payload["type"] == "delivery.failed"
    assert event.payload["data"]["status"] == "expired"
