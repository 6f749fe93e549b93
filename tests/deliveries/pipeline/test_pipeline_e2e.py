"""The whole path on real services: API → outbox → RabbitMQ → a real worker process →
feed + Redis counter + a real SMTP server, and the status endpoint reporting it."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from kombu import Queue

from deliveries.models import Delivery, DeliveryAttempt
from notify.models import Notification, Recipient
from tests.statuses import settled
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ORDER = {"order_number": "A-1001", "delivery_date": "2026-12-03", "items_count": 2}


def post_event(api, *, user_id: str, category: str = "order.shipped", payload=None, **extra):
    body = {
        "event_id": extra.pop("event_id", str(uuid.uuid4())),
        "user_id": user_id,
        "category": category,
        "payload": payload if payload is not None else ORDER,
        **extra,
    }
    return api.post("/v1/notifications", body, format="json")


def register(api, user_id: str, **fields) -> None:
    response = api.put(f"/v1/users/{user_id}", fields, format="json")
    assert response.status_code in (200, 201), response.content


def test_event_reaches_feed_counter_and_inbox_in_the_recipients_locale(api, pipeline):
    smtp = pipeline
    register(api, "u-ru", email="ivan@example.com", locale="ru-RU", timezone="Europe/Moscow")

    response = post_event(api, user_id="u-ru", channels=["inapp", "email"])
    assert response.status_code == 202
    notification_id = response.json()["notification_id"]

    found = wait_for(settled(api, notification_id, {"inapp", "email"}), what="both channels")
    assert found["inapp"]["status"] == "delivered"
    assert found["email"]["status"] == "delivered"
    assert found["email"]["template_version"] == 1
    assert found["email"]["attempts"] == 1

    feed = api.get("/v1/users/u-ru/feed").json()["results"]
    assert [entry["title"] for entry in feed] == ["Заказ №A-1001 в пути"]
    assert api.get("/v1/users/u-ru/unread-count").json() == {"count": 1}

    mail = wait_for(lambda: smtp.received, what="the email")[0]
    assert mail.rcpt_tos == ["ivan@example.com"]
    assert mail.subject == "Заказ №A-1001 отправлен"
    assert "Ожидаемая доставка — 2026-12-03" in mail.part("text/plain")
    assert "<strong>№A-1001</strong>" in mail.part("text/html")


def test_missing_locale_falls_back_to_english(api, pipeline):
    smtp = pipeline
    register(api, "u-de", email="hans@example.com", locale="de-AT")
    notification_id = post_event(api, user_id="u-de", channels=["email"]).json()["notification_id"]
    wait_for(settled(api, notification_id, {"email"}), what="email delivered")
    assert smtp.received[0].subject == "Order A-1001 has shipped"


def test_posting_the_same_event_again_changes_nothing(api, pipeline):
    smtp = pipeline
    register(api, "u-dup", email="dup@example.com", locale="en")
    first = post_event(api, user_id="u-dup", event_id="order-77-shipped")
    notification_id = first.json()["notification_id"]
    wait_for(settled(api, notification_id, {"inapp", "email"}), what="first delivery")

    again = post_event(api, user_id="u-dup", event_id="order-77-shipped")
    assert again.status_code == 202
    assert again.json()["notification_id"] == notification_id

    from notify.relay import outbox_publish_pending

    outbox_publish_pending()  # even a sweeper pass must not resend
    assert Notification.objects.count() == 1
    assert len(smtp.received) == 1
    assert api.get("/v1/users/u-dup/unread-count").json() == {"count": 1}


@pytest.mark.alone  # it times the retry gaps, which the processes beside it would stretch
def test_smtp_451_three_times_then_250_is_delivered_on_the_fourth_try(api, pipeline):
    smtp = pipeline
    smtp.handler.data_answers.extend(["451 4.3.0 Try again later"] * 3)
    register(api, "u-retry", email="retry@example.com", locale="en")
    notification_id = post_event(api, user_id="u-retry", channels=["email"]).json()[
        "notification_id"
    ]

    found = wait_for(settled(api, notification_id, {"email"}), timeout=20, what="delivery")
    assert found["email"]["status"] == "delivered"
    assert found["email"]["attempts"] == 4
    attempts = list(DeliveryAttempt.objects.filter(delivery__channel="email").order_by("number"))
    assert [a.outcome for a in attempts] == ["transient"] * 3 + ["delivered"]
    assert [a.status_code for a in attempts[:3]] == ["451"] * 3

    gaps = [
        b - a for a, b in zip(smtp.handler.data_calls, smtp.handler.data_calls[1:], strict=False)
    ]
    # Test delays are 0.3, 0.6, 1.2 s with ±20 % jitter: each gap longer than the last,
    # and each within its jitter band (plus a little processing time).
    assert gaps == sorted(gaps)
    for gap, base in zip(gaps, [0.3, 0.6, 1.2], strict=True):
        assert base * 0.8 <= gap <= base * 1.2 + 0.5, gaps
    assert len(smtp.received) == 1


def test_smtp_550_recipient_refused_fails_without_retry(api, pipeline):
    smtp = pipeline
    smtp.handler.rcpt_answers.append("550 5.1.1 No such user here")
    register(api, "u-550", email="nobody@example.com", locale="en")
    notification_id = post_event(api, user_id="u-550", channels=["email"]).json()["notification_id"]
    found = wait_for(settled(api, notification_id, {"email"}), what="failure")
    assert found["email"]["status"] == "failed"
    assert found["email"]["reason"] == "rejected"
    assert found["email"]["attempts"] == 1
    assert "550" in found["email"]["last_error"]
    assert smtp.handler.data_calls == []


def test_always_451_ends_dead_and_the_message_is_dead_lettered(api, pipeline, broker):
    smtp = pipeline
    smtp.handler.default_data_answer = "451 4.4.1 Relay busy"
    register(api, "u-dead", email="busy@example.com", locale="en")
    notification_id = post_event(api, user_id="u-dead", channels=["email"]).json()[
        "notification_id"
    ]

    found = wait_for(settled(api, notification_id, {"email"}), timeout=30, what="dead")
    assert found["email"]["status"] == "dead"
    assert found["email"]["reason"] == "retries_exhausted"
    assert found["email"]["attempts"] == 6  # the first try and five retries
    delivery = Delivery.objects.get(notification_id=notification_id, channel="email")

    def dead_lettered():
        dead = Queue("dead_letter", no_declare=True)(broker.default_channel)
        message = dead.get(no_ack=False)
        if message is None:
            return None
        message.ack()
        body = message.decode() if hasattr(message, "decode") else json.loads(message.body)
        args = body[0] if isinstance(body, list) else body.get("args")
        return message.headers.get("task") == "deliveries.send" and args == [delivery.pk]

    assert wait_for(dead_lettered, what="the send message in dead_letter")


def test_queue_class_of_the_category_decides_the_broker_queue(api, pipeline, broker):
    from django.conf import settings

    api_client = api
    register(api_client, "u-q", email="q@example.com", locale="en")
    channel = broker.default_channel
    # A private queue bound to our exchange with the same routing keys sees what the
    # broker routes to `high` and `low`, without taking messages from their workers.
    taps = {}
    for key in ("high", "low"):
        tap = Queue(
            f"tap-{key}-{uuid.uuid4().hex[:8]}",
            settings.NOTIFY_EXCHANGE,
            routing_key=key,
            exclusive=True,
            auto_delete=True,
        )(channel)
        tap.declare()
        taps[key] = tap

    login = post_event(
        api_client, user_id="u-q", category="security.login_code", payload={"code": "123456"}
    ).json()["notification_id"]
    promo = post_event(
        api_client,
        user_id="u-q",
        category="promo.weekly",
        payload={"headline": "Sale", "url": "https://shop.example/s"},
    ).json()["notification_id"]

    def routed_ids(tap):
        ids = []
        while (message := tap.get(no_ack=True)) is not None:
            if message.headers.get("task") == "deliveries.route":
                ids.extend(message.decode()[0][0])  # one message routes a batch of ids
        return ids

    assert wait_for(lambda: login in routed_ids(taps["high"]), what="login code on high")
    assert wait_for(lambda: promo in routed_ids(taps["low"]), what="promo on low")
    assert Recipient.objects.filter(user_id="u-q").exists()


def test_a_scheduled_event_is_routed_at_its_send_at_not_before(api, pipeline):
    register(api, "u-later", email="later@example.com", locale="en")
    send_at = timezone.now() + timedelta(seconds=2)
    response = post_event(api, user_id="u-later", channels=["inapp"], send_at=send_at.isoformat())
    assert response.status_code == 202, response.content
    notification_id = response.json()["notification_id"]

    status = api.get(f"/v1/notifications/{notification_id}/status").json()
    assert status["deliveries"] == []  # durable, waiting in the outbox: not routed yet
    assert status["send_at"].startswith(send_at.strftime("%Y-%m-%dT%H:%M:%S"))
    found = wait_for(settled(api, notification_id, {"inapp"}), what="the scheduled delivery")
    assert found["inapp"]["status"] == "delivered"
    routed_at = Notification.objects.get(pk=notification_id).routed_at
    assert routed_at >= send_at


def test_a_send_at_too_far_ahead_is_refused(api, db, demo_data):
    register(api, "u-far", email="far@example.com")
    response = post_event(api, user_id="u-far", send_at="2099-01-01T00:00:00Z")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "out_of_window"
    assert response.json()["error"]["field"] == "send_at"
