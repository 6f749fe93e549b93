"""Email through an ESP on real processes: the API takes the notifications, worker
processes route and send them through the Postmark peer on loopback, and the peer posts
Postmark's tracking webhooks over HTTP to the running server, signed as Postmark signs
(basic auth in the URL). The producer's loopback endpoint hears what the provider said.

Also: a provider event that overtakes the record of its send (the peer posts it before
it even answers the send) is kept and applied once the send is recorded.
"""

from __future__ import annotations

import os
import uuid

import pytest
from django.contrib.auth.models import User
from standardwebhooks.webhooks import Webhook

from config.celery import app
from deliveries.models import (
    AddressSuppression,
    Delivery,
    DeliveryStatus,
    EarlyProviderEvent,
    ProviderEvent,
    Reason,
)
from notify.roles import support_group_ensure
from tests.peers import postmark
from tests.peers.webhooks import WebhookReceiver
from tests.waiting import wait_for

SECRET = "postmark-hooks:s3cret-in-the-url"
HOOK = "/v1/webhooks/email/postmark/tracking/"
ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}
PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}


@pytest.fixture(scope="module")
def receiver_peer():
    peer = WebhookReceiver(int(os.environ["NOTIFY_TEST_WEBHOOK_PORT"]))
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture
def esp_workers(postmark_peer, receiver_peer, pipeline, workers_with, settings):
    """Workers that send email through the Postmark peer; this process (the live
    server's) verifies the peer's webhooks with SECRET."""
    postmark_peer.reset()
    receiver_peer.reset()
    settings.ANYMAIL = {**settings.ANYMAIL, "WEBHOOK_SECRET": [SECRET]}
    settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = 0

    def start() -> None:
        workers_with(
            NOTIFY_EMAIL_ESP="postmark",
            POSTMARK_SERVER_TOKEN=postmark.TOKEN,
            POSTMARK_API_URL=postmark_peer.url,
            NOTIFY_ESP_WEBHOOK_SECRET=SECRET,
        )

    yield start
    postmark_peer.before_answer = None


def notify(api, category: str = "order.shipped", payload=None) -> Delivery:
    """Send one email notification to pat through the API; its email delivery once a
    worker has routed it."""
    answer = api.post(
        "/v1/notifications",
        {"event_id": str(uuid.uuid4()), "user_id": "pat", "category": category,
         "payload": payload or ORDER, "channels": ["email"]},
        format="json",
    )  # fmt: skip
    assert answer.status_code == 202, answer.content
    notification_id = answer.json()["notification_id"]
    return wait_for(
        lambda: Delivery.objects.filter(notification_id=notification_id, channel="email").first(),
        what="the email routed",
    )


def settled(delivery: Delivery, *statuses: str) -> Delivery:
    def check():
        delivery.refresh_from_db()
        return delivery.status in statuses and delivery

    return wait_for(check, timeout=30, what=f"delivery {delivery.pk} in {statuses}")


def posted(receiver: WebhookReceiver, secret: str, delivery_id: int) -> list[dict]:
    """The events the producer's endpoint took about one delivery, each verified."""
    verifier = Webhook(secret)
    payloads = []
    for headers, body in receiver.accepted():
        payload = verifier.verify(body, {k.lower(): v for k, v in headers.items()})
        if payload["data"].get("delivery_id") == delivery_id:
            payloads.append(payload)
    return payloads


def posted_types(receiver: WebhookReceiver, secret: str, delivery_id: int) -> list[str]:
    """The event types the producer's endpoint took about one delivery, each verified."""
    return [payload["type"] for payload in posted(receiver, secret, delivery_id)]


def test_delivered_then_a_hard_bounce_from_the_provider_on_real_processes(
    api, pat, esp_workers, postmark_peer, receiver_peer, live_server, client
):
    """Acceptance: an email through the ESP peer; the peer posts `delivered`, later a
    hard bounce: the timeline shows both and the producer hears both; a bad signature is
    refused and records nothing, a replay is recorded once; the next email to the address
    is suppressed with zero attempts."""
    wanted = ["delivery.delivered", "delivery.reached", "delivery.failed"]
    created = api.post(
        "/v1/webhooks", {"url": receiver_peer.url, "event_types": wanted}, format="json"
    )
    assert created.status_code == 201, created.content
    esp_workers()
    url = live_server.url + HOOK

    first = settled(notify(api), DeliveryStatus.DELIVERED)
    message_id = first.provider_message_id
    assert [m["MessageID"] for m in postmark_peer.received] == [message_id]
    assert first.attempt_log.get().provider_message_id == message_id

    delivered = postmark.delivery_event(message_id, pat.email)
    delivered["DeliveredAt"] = "2026-12-01T10:00:01.5Z"  # the provider's time, not ours
    assert postmark_peer.post_webhook(url, delivered, user_password=SECRET) == 200
    assert settled(first, DeliveryStatus.REACHED)

    bounce = postmark.bounce_event(message_id, pat.email, event_id=5)
    bounce["BouncedAt"] = "2026-12-01T12:00:02+02:00"
    forged = postmark_peer.post_webhook(url, bounce, user_password="postmark-hooks:forged")
    assert 400 <= forged < 500
    assert ProviderEvent.objects.count() == 1  # the forged post recorded nothing
    assert postmark_peer.post_webhook(url, bounce, user_password=SECRET) == 200
    assert postmark_peer.post_webhook(url, bounce, user_password=SECRET) == 200  # replayed
    first.refresh_from_db()
    assert (first.status, first.reason) == (DeliveryStatus.FAILED, Reason.BOUNCED)
    assert sorted(ProviderEvent.objects.values_list("kind", flat=True)) == [
        "bounced",
        "delivered",
    ]
    [entry] = AddressSuppression.objects.all()
    assert (entry.channel, entry.address) == ("email", "pat@example.com")

    second = settled(notify(api), DeliveryStatus.SUPPRESSED)
    assert (second.reason, second.attempts) == (Reason.ADDRESS_SUPPRESSED, 0)
    assert len(postmark_peer.received) == 1

    secret = created.json()["secret"]
    wait_for(lambda: len(posted_types(receiver_peer, secret, first.pk)) >= 3, what="3 posts")
    # Each event once; posts of separate messages are not ordered (docs/webhooks.md), and
    # the payload's timestamp says when each happened.
    types = posted_types(receiver_peer, secret, first.pk)
    assert sorted(types) == sorted(wanted), types
    # The provider's own time of what it reported; our send has none. Posts may arrive
    # out of order (a retried one after a later one), so they are read in the order
    # their `sequence` says they happened, as a receiver does (docs/webhooks.md).
    in_order = sorted(posted(receiver_peer, secret, first.pk), key=lambda p: p["data"]["sequence"])
    assert [p["data"].get("provider_occurred_at") for p in in_order] == [
        None,
        "2026-12-01T10:00:01.500000Z",
        "2026-12-01T10:00:02.000000Z",
    ]
    assert "provider_occurred_at" not in in_order[0]["data"]

    staff = User.objects.create_user("sam", password="x", is_staff=True)
    staff.groups.add(support_group_ensure())
    client.force_login(staff)
    page = client.get(f"/admin/notify/recipient/{pat.pk}/change/").content.decode()
    assert 'data-kind="delivered"' in page and 'data-kind="bounced"' in page


def test_a_complaint_stops_marketing_email_but_not_login_codes_on_real_processes(
    api, pat, esp_workers, postmark_peer, receiver_peer, live_server
):
    created = api.post(
        "/v1/webhooks",
        {"url": receiver_peer.url, "event_types": ["delivery.complained"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    esp_workers()
    promo = settled(notify(api, "promo.weekly", PROMO), DeliveryStatus.DELIVERED)
    complaint = postmark.complaint_event(promo.provider_message_id, pat.email)
    assert postmark_peer.post_webhook(live_server.url + HOOK, complaint, user_password=SECRET)

    next_promo = settled(notify(api, "promo.weekly", PROMO), DeliveryStatus.SUPPRESSED)
    assert next_promo.reason == Reason.NO_CONSENT
    code = notify(api, "security.login_code", {"code": "482913"})
    assert settled(code, DeliveryStatus.DELIVERED)
    assert len(postmark_peer.received) == 2  # the promo before, the login code after

    secret = created.json()["secret"]
    wait_for(lambda: posted_types(receiver_peer, secret, promo.pk), what="the complaint post")
    assert posted_types(receiver_peer, secret, promo.pk) == ["delivery.complained"]


def test_provider_events_that_overtake_the_record_of_their_send_are_applied_after_it(
    api, pat, esp_workers, postmark_peer, live_server
):
    """The peer posts `delivered` and then a hard bounce before it answers the send: no
    delivery carries the message id yet. Both are answered 200 and kept; once the worker
    has recorded the send, the sweep applies them in order: the email ends failed
    (bounced) and the address is suppressed."""
    url = live_server.url + HOOK
    answers: list[int] = []

    def report_first(message_id: str, message: dict) -> None:
        for body in (
            postmark.delivery_event(message_id, message["To"]),
            postmark.bounce_event(message_id, message["To"], event_id=77),
        ):
            answers.append(postmark_peer.post_webhook(url, body, user_password=SECRET))

    postmark_peer.before_answer = report_first
    esp_workers()
    delivery = settled(notify(api), DeliveryStatus.DELIVERED, DeliveryStatus.FAILED)
    assert answers == [200, 200]
    assert not ProviderEvent.objects.exists()
    assert EarlyProviderEvent.objects.count() == 2

    app.send_task("deliveries.provider_events_sweep", queue="low")  # as beat does
    settled(delivery, DeliveryStatus.FAILED)
    assert delivery.reason == Reason.BOUNCED
    kinds = list(ProviderEvent.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds == ["delivered", "bounced"]
    assert not EarlyProviderEvent.objects.exists()
    assert AddressSuppression.objects.filter(address="pat@example.com").exists()
