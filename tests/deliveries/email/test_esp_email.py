"""Email through an ESP (Postmark, on a real HTTP peer on loopback) and the provider's
events coming back through its tracking webhook: delivered, bounced, complained,
unsubscribed, opened.

Sends run in this process against the peer through anymail's real Postmark backend;
webhooks are posted to the real endpoint (Django's test client) with Postmark's bodies
and its basic auth.
"""

from __future__ import annotations

import base64
import json
import logging
from datetime import time

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from campaigns.erasure import person_erase
from campaigns.selectors import campaign_progress
from deliveries.channels.esp import kept_session_close
from deliveries.checks import check_email_provider
from deliveries.models import (
    AddressSuppression,
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
    EarlyProviderEvent,
    ProviderEvent,
    ProviderEventKind,
    Reason,
)
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.provider_events import Applied, ProviderNews, provider_event_apply
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient
from notify.roles import support_group_ensure
from preferences.models import ConsentRecord, ConsentSource, QuietHours
from preferences.services import RequestOrigin, marketing_consent_grant
from tests.campaigns.conftest import fan_out_all, launch, seed_recipients
from tests.peers import postmark
from tests.peers.postmark import PostmarkPeer, email_through_peer

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}
PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}
SECRET = "postmark-hooks:s3cret-in-the-url"
HOOK = "/v1/webhooks/email/postmark/tracking/"


@pytest.fixture
def esp(postmark_peer, settings, clean_breakers):
    """Email goes through the Postmark peer; its webhooks authenticate with SECRET."""
    email_through_peer(settings, postmark_peer, WEBHOOK_SECRET=[SECRET])
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    kept_session_close()
    yield postmark_peer
    kept_session_close()


@pytest.fixture
def person(demo_data):
    person = Recipient.objects.create(user_id="p1", email="Pat@Example.com", locale="en")
    marketing_consent_grant(recipient=person, origin=RequestOrigin(source=ConsentSource.SIGNUP))
    QuietHours.objects.create(recipient=person, start=time(0, 0), end=time(0, 0))
    return person


def email_to(person: Recipient, category: str = "order.shipped", payload=None) -> Delivery:
    """Route an email of `category` to `person`; its delivery row (not sent yet)."""
    producer, _ = Producer.objects.get_or_create(name="esp")
    notification = Notification.objects.create(
        producer=producer, event_id=f"e{Notification.objects.count()}", recipient=person,
        category=Category.objects.get(key=category), payload=payload or ORDER,
        channels=["email"], fingerprint="x",
    )  # fmt: skip
    notification_route(notification_id=str(notification.pk))
    return Delivery.objects.get(notification=notification, channel="email")


def sent(delivery: Delivery) -> Delivery:
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    return delivery


def bounced_and_suppressed(first: Delivery, person: Recipient, received: list) -> None:
    """`first` failed (bounced) and its address is suppressed: the next email to `person`
    is suppressed without a try, so the provider received only `first`."""
    first.refresh_from_db()
    assert (first.status, first.reason) == (DeliveryStatus.FAILED, Reason.BOUNCED)
    [entry] = AddressSuppression.objects.all()
    assert (entry.channel, entry.address) == ("email", "pat@example.com")
    second = email_to(person)
    assert (second.status, second.reason) == (DeliveryStatus.SUPPRESSED, Reason.ADDRESS_SUPPRESSED)
    assert sent(second).attempts == 0
    assert len(received) == 1


def post_event(client, body: dict, *, auth: str | None = SECRET):
    headers = {"HTTP_AUTHORIZATION": postmark.basic_auth(auth)} if auth else {}
    return client.post(HOOK, data=json.dumps(body), content_type="application/json", **headers)


def test_an_email_goes_through_the_esp_and_its_message_id_is_kept_on_the_attempt(person, esp):
    delivery = sent(email_to(person))
    assert delivery.status == DeliveryStatus.DELIVERED
    [received] = esp.received
    assert received["To"] == "Pat@Example.com" and received["Subject"]
    assert received["TextBody"] or received["HtmlBody"]
    assert delivery.provider_message_id == received["MessageID"]
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.provider_message_id == received["MessageID"]


def test_marketing_email_through_the_esp_carries_the_one_click_unsubscribe(person, esp):
    sent(email_to(person, "promo.weekly", PROMO))
    [received] = esp.received
    headers = {h["Name"]: h["Value"] for h in received["Headers"]}
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert headers["List-Unsubscribe"].strip("<>") in received["TextBody"]


@pytest.mark.parametrize(
    ("answer", "status", "code", "suppressed"),
    [
        (PostmarkPeer.rate_limited(7), DeliveryStatus.RETRYING, "429/429", False),
        (PostmarkPeer.unavailable(), DeliveryStatus.RETRYING, "503/100", False),
        (PostmarkPeer.not_allowed_to_send(), DeliveryStatus.RETRYING, "422/405", False),
        (PostmarkPeer.invalid_request(), DeliveryStatus.FAILED, "422/300", False),
        ("inactive", DeliveryStatus.FAILED, "refused", True),
    ],
    ids=["rate-limited", "unavailable", "account", "bad-message", "inactive-recipient"],
)
def test_postmark_answers_are_classified(person, esp, answer, status, code, suppressed):
    if answer == "inactive":
        esp.inactive.add("pat@example.com")
    else:
        esp.answers.append(answer)
    started = timezone.now()
    delivery = sent(email_to(person))
    assert delivery.status == status
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.status_code == code
    assert AddressSuppression.objects.filter(address="pat@example.com").exists() == suppressed
    if code == "429/429":  # the provider's Retry-After, not our first step (10 s)
        wait = (delivery.next_attempt_at - started).total_seconds()
        assert 7 <= wait < 9


def test_a_burst_of_esp_failures_opens_the_breaker_and_later_emails_wait(person, esp, settings):
    settings.NOTIFY_BREAKER_FAILURES = 2
    for _ in range(2):
        esp.answers.append(PostmarkPeer.unavailable())
        assert sent(email_to(person)).status == DeliveryStatus.RETRYING
    waiting = sent(email_to(person))
    assert waiting.status == DeliveryStatus.RETRYING and waiting.attempts == 0
    assert "postmark circuit open" in waiting.last_error
    assert len(esp.received) == 0


def test_a_webhook_with_a_bad_signature_is_refused_and_records_nothing(
    person, esp, client, settings
):
    delivery = sent(email_to(person))
    bounce = postmark.bounce_event(delivery.provider_message_id, person.email)
    for auth in (None, "postmark-hooks:wrong", "someone:else"):
        assert post_event(client, bounce, auth=auth).status_code == 400
    # Without a configured secret, even a post that carries one is refused.
    settings.ANYMAIL = {**settings.ANYMAIL, "WEBHOOK_SECRET": []}
    assert post_event(client, bounce).status_code == 400
    assert post_event(client, bounce, auth=None).status_code == 400
    assert not ProviderEvent.objects.exists() and not AddressSuppression.objects.exists()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED


def test_a_replayed_webhook_is_recorded_once(person, esp, client):
    delivery = sent(email_to(person))
    delivered = postmark.delivery_event(delivery.provider_message_id, person.email)
    bounce = postmark.bounce_event(delivery.provider_message_id, person.email, event_id=77)
    for body in (delivered, delivered, bounce, bounce):
        assert post_event(client, body).status_code == 200
    assert sorted(ProviderEvent.objects.values_list("kind", flat=True)) == ["bounced", "delivered"]
    assert AddressSuppression.objects.count() == 1


def test_an_event_for_an_unknown_message_is_answered_2xx_logged_and_changes_nothing(
    person, esp, client, caplog
):
    delivery = sent(email_to(person))
    bounce = postmark.bounce_event("00000000-0000-0000-0000-000000000000", person.email)
    with caplog.at_level(logging.INFO, logger="deliveries.pipeline.provider_events"):
        assert post_event(client, bounce).status_code == 200
    assert "unknown message 00000000-0000-0000-0000-000000000000" in caplog.text
    assert not ProviderEvent.objects.exists() and not AddressSuppression.objects.exists()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED


def test_a_soft_bounce_is_recorded_and_changes_nothing_else(person, esp, client):
    delivery = sent(email_to(person))
    soft = postmark.bounce_event(delivery.provider_message_id, person.email, kind="SoftBounce")
    assert post_event(client, soft).status_code == 200
    [event] = ProviderEvent.objects.all()
    assert (event.kind, event.hard) == ("bounced", False)
    assert not AddressSuppression.objects.exists()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert sent(email_to(person)).status == DeliveryStatus.DELIVERED


def test_a_complaint_stops_marketing_email_but_not_login_codes(person, esp, client):
    promo = sent(email_to(person, "promo.weekly", PROMO))
    assert promo.status == DeliveryStatus.DELIVERED
    complaint = postmark.complaint_event(promo.provider_message_id, person.email)
    assert post_event(client, complaint).status_code == 200

    record = ConsentRecord.objects.filter(recipient=person).latest("id")
    assert (record.source, record.granted, record.channel) == ("spam_complaint", False, "email")
    assert record.category is None  # all marketing on email

    next_promo = email_to(person, "promo.weekly", PROMO)
    assert (next_promo.status, next_promo.reason) == (
        DeliveryStatus.SUPPRESSED,
        Reason.NO_CONSENT,
    )
    code = sent(email_to(person, "security.login_code", {"code": "482913"}))
    assert code.status == DeliveryStatus.DELIVERED
    assert len(esp.received) == 2  # the promo before, the login code after


def test_an_unsubscribe_at_postmark_stops_marketing_email_but_not_login_codes(
    person, esp, client, settings
):
    """Postmark's SubscriptionChange (the person unsubscribed by its link or header)
    withdraws marketing email as a complaint does, under its own source; it posts no
    status webhook (no event type says it)."""
    from webhooks.models import WebhookEndpoint, WebhookEvent, WebhookEventType, WebhookSubscription

    settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = 0
    promo = sent(email_to(person, "promo.weekly", PROMO))
    endpoint = WebhookEndpoint.objects.create(
        producer=promo.notification.producer, url="https://hooks.example.com/notify",
        secret="whsec_" + "A" * 32,
    )  # fmt: skip
    for event_type in WebhookEventType.values:
        WebhookSubscription.objects.create(
            endpoint=endpoint, producer=endpoint.producer, event_type=event_type
        )
    unsubscribe = postmark.subscription_change_event(promo.provider_message_id, person.email)
    assert post_event(client, unsubscribe).status_code == 200

    [event] = ProviderEvent.objects.all()
    assert (event.kind, event.delivery_id) == ("unsubscribed", promo.pk)
    record = ConsentRecord.objects.filter(recipient=person).latest("id")
    assert (record.source, record.granted, record.channel) == ("esp_unsubscribe", False, "email")
    assert record.category is None  # all marketing on email
    assert not WebhookEvent.objects.filter(endpoint=endpoint).exists()

    next_promo = email_to(person, "promo.weekly", PROMO)
    assert (next_promo.status, next_promo.reason) == (
        DeliveryStatus.SUPPRESSED,
        Reason.NO_CONSENT,
    )
    code = sent(email_to(person, "security.login_code", {"code": "482913"}))
    assert code.status == DeliveryStatus.DELIVERED
    assert len(esp.received) == 2  # the promo before, the login code after


def test_a_replayed_unsubscribe_changes_nothing_and_is_counted_once(person, esp, client, settings):
    from analytics.models import AnalyticsEvent

    settings.NOTIFY_ANALYTICS_ENABLED = True
    promo = sent(email_to(person, "promo.weekly", PROMO))
    unsubscribe = postmark.subscription_change_event(promo.provider_message_id, person.email)
    for _ in range(2):
        assert post_event(client, unsubscribe).status_code == 200
    assert ProviderEvent.objects.filter(kind="unsubscribed").count() == 1
    assert ConsentRecord.objects.filter(recipient=person, source="esp_unsubscribe").count() == 1
    [counted] = AnalyticsEvent.objects.filter(kind="unsubscribed")
    assert (counted.reason, counted.delivery_id) == ("esp_unsubscribe", promo.pk)
    assert (counted.category, counted.channel, counted.provider) == ("", "email", "postmark")


def test_a_reactivation_at_postmark_gives_no_consent_back(person, esp, client):
    """Postmark's SubscriptionChange that stops suppressing (anymail: `subscribed`) is not
    acted on: we never grant consent again on a provider's word."""
    promo = sent(email_to(person, "promo.weekly", PROMO))
    message_id = promo.provider_message_id
    for suppress in (True, False):
        body = postmark.subscription_change_event(message_id, person.email, suppress=suppress)
        assert post_event(client, body).status_code == 200
    assert list(ProviderEvent.objects.values_list("kind", flat=True)) == ["unsubscribed"]
    latest = ConsentRecord.objects.filter(recipient=person).latest("id")
    assert (latest.source, latest.granted) == ("esp_unsubscribe", False)
    next_promo = email_to(person, "promo.weekly", PROMO)
    assert next_promo.status == DeliveryStatus.SUPPRESSED


def test_postmarks_suppression_for_a_complaint_is_not_applied_twice(person, esp, client):
    """Postmark posts a Subscription change too when a complaint suppresses the address:
    the Spam complaint webhook already said it, so one record, one withdrawal."""
    promo = sent(email_to(person, "promo.weekly", PROMO))
    message_id = promo.provider_message_id
    for body in (
        postmark.complaint_event(message_id, person.email),
        postmark.subscription_change_event(message_id, person.email, reason="SpamComplaint"),
    ):
        assert post_event(client, body).status_code == 200
    assert list(ProviderEvent.objects.values_list("kind", flat=True)) == ["complained"]
    withdrawn = ConsentRecord.objects.filter(recipient=person, granted=False)
    assert list(withdrawn.values_list("source", flat=True)) == ["spam_complaint"]


def test_opens_and_clicks_are_recorded_and_shown_without_changing_the_status(person, esp, client):
    delivery = sent(email_to(person))
    message_id = delivery.provider_message_id
    assert post_event(client, postmark.open_event(message_id, person.email)).status_code == 200
    assert post_event(client, postmark.click_event(message_id, person.email)).status_code == 200
    kinds = list(ProviderEvent.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds == ["opened", "clicked"]
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED


def test_campaign_progress_counts_what_the_provider_said_and_the_counts_add_up(
    demo_data, esp, client
):
    recipients = seed_recipients(5, prefix="esp")
    campaign = launch()
    fan_out_all(campaign)
    emails = []
    for notification in Notification.objects.filter(recipient__in=recipients):
        notification_route(notification_id=str(notification.pk))
        emails.append(sent(Delivery.objects.get(notification=notification, channel="email")))
    ids = [e.provider_message_id for e in emails]
    to = [e.target for e in emails]
    for body in (
        postmark.delivery_event(ids[0], to[0]),
        postmark.delivery_event(ids[1], to[1]),
        postmark.open_event(ids[1], to[1]),
        postmark.bounce_event(ids[2], to[2], event_id=1),
        postmark.delivery_event(ids[3], to[3]),
        postmark.complaint_event(ids[3], to[3], event_id=2),
    ):
        assert post_event(client, body).status_code == 200

    email = campaign_progress(campaign).email
    assert email == {
        "accepted": 5, "complained": 1, "bounced": 1, "opened": 1, "delivered": 1,
        "accepted_only": 1,
    }  # fmt: skip
    assert sum(v for k, v in email.items() if k != "accepted") == email["accepted"]
    # And which provider took them (each attempt names its own).
    assert campaign_progress(campaign).providers == {"postmark": 5}


def test_erasure_removes_the_persons_provider_events(person, esp, client):
    delivery = sent(email_to(person))
    message_id = delivery.provider_message_id
    post_event(client, postmark.delivery_event(message_id, person.email))
    post_event(client, postmark.open_event(message_id, person.email))
    assert ProviderEvent.objects.count() == 2
    # An event that waits for its send's record (the sweep has not applied it yet).
    EarlyProviderEvent.objects.create(
        esp="postmark", key="k", kind="bounced", message_id=message_id, detail=person.email
    )
    person_erase(user_id=person.user_id, via="api", requested_by="test")
    assert not ProviderEvent.objects.exists()
    assert not EarlyProviderEvent.objects.exists()


def test_the_deploy_check_wants_the_token_and_the_webhook_secret_with_an_esp(settings):
    settings.NOTIFY_EMAIL_ESP = ""
    assert check_email_provider() == []
    settings.NOTIFY_EMAIL_ESP = "postmark"
    settings.ANYMAIL = {"POSTMARK_SERVER_TOKEN": "", "WEBHOOK_SECRET": []}
    assert [c.id for c in check_email_provider()] == ["notify.E004", "notify.E005"]
    settings.ANYMAIL = {"POSTMARK_SERVER_TOKEN": "t", "WEBHOOK_SECRET": [SECRET]}
    assert check_email_provider() == []
    # Every ESP of a failover list is checked, though NOTIFY_EMAIL_ESP names none.
    settings.NOTIFY_EMAIL_ESP = ""
    settings.NOTIFY_CHANNEL_FAILOVER = {"email": ["smtp", "postmark"]}
    settings.ANYMAIL = {"POSTMARK_SERVER_TOKEN": "", "WEBHOOK_SECRET": [SECRET]}
    assert [c.id for c in check_email_provider()] == ["notify.E004"]


def test_delivered_then_a_hard_bounce_posted_over_http_show_on_the_timeline_and_suppress(
    transactional_db, session_worker_paused, person, esp, live_server, client
):
    """An email through the Postmark peer; the peer then posts `delivered`, later a hard
    bounce, over HTTP to the running server with the credentials in the URL, as Postmark
    does: the timeline shows both, and the next email to the address is suppressed."""
    first = sent(email_to(person))
    message_id = first.provider_message_id
    assert [m["MessageID"] for m in esp.received] == [message_id]
    url = live_server.url + HOOK

    delivered = postmark.delivery_event(message_id, person.email)
    assert esp.post_webhook(url, delivered, user_password=SECRET) == 200
    first.refresh_from_db()
    assert first.status == DeliveryStatus.REACHED  # the provider handed it over

    bounce = postmark.bounce_event(message_id, person.email, event_id=5)
    assert esp.post_webhook(url, bounce, user_password="postmark-hooks:forged") == 400
    assert esp.post_webhook(url, bounce, user_password=SECRET) == 200
    bounced_and_suppressed(first, person, esp.received)

    staff = User.objects.create_user("sam", password="x", is_staff=True)
    staff.groups.add(support_group_ensure())
    client.force_login(staff)
    page = client.get(f"/admin/notify/recipient/{person.pk}/change/").content.decode()
    assert 'data-kind="delivered"' in page and 'data-kind="bounced"' in page
    assert "(hard)" in page and "550 5.1.1" in page


def test_a_hard_bounce_reported_later_posts_delivery_failed_to_the_producers_webhooks(
    person, esp, client, settings
):
    """The producer subscribed to `delivery.failed` hears of a bounce that arrives after
    the email was accepted: the event is written with the status change."""
    from webhooks.models import WebhookEndpoint, WebhookEvent, WebhookSubscription

    settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = 0
    first = sent(email_to(person))
    endpoint = WebhookEndpoint.objects.create(
        producer=first.notification.producer, url="https://hooks.example.com/notify",
        secret="whsec_" + "A" * 32,
    )  # fmt: skip
    WebhookSubscription.objects.create(
        endpoint=endpoint, producer=endpoint.producer, event_type="delivery.failed"
    )
    bounce = postmark.bounce_event(first.provider_message_id, person.email, event_id=9)
    bounce["BouncedAt"] = "2026-12-01T05:15:30.25-05:00"  # the provider's time, not ours
    auth = "Basic " + base64.b64encode(SECRET.encode()).decode()
    answer = client.post(
        HOOK, json.dumps(bounce), content_type="application/json", HTTP_AUTHORIZATION=auth
    )
    assert answer.status_code == 200
    [event] = WebhookEvent.objects.filter(endpoint=endpoint)
    assert event.event_type == "delivery.failed"
    assert event.payload["data"]["delivery_id"] == first.pk, event.payload
    assert event.payload["data"]["status"] == "failed"
    assert event.payload["data"]["provider_occurred_at"] == "2026-12-01T10:15:30.250000Z"


def test_what_the_provider_said_is_posted_to_the_producers_webhooks(person, esp, client, settings):
    """`reached`, a complaint, an open and a click each become the event the producer
    subscribed to, written with the news; a soft bounce (nothing changed) posts nothing."""
    from webhooks.models import WebhookEndpoint, WebhookEvent, WebhookSubscription

    settings.NOTIFY_WEBHOOK_SUBSCRIPTION_CACHE_SECONDS = 0
    delivery = sent(email_to(person, "promo.weekly", PROMO))
    endpoint = WebhookEndpoint.objects.create(
        producer=delivery.notification.producer, url="https://hooks.example.com/notify",
        secret="whsec_" + "A" * 32,
    )  # fmt: skip
    wanted = ["delivery.reached", "delivery.complained", "delivery.opened", "delivery.clicked"]
    for event_type in wanted:
        WebhookSubscription.objects.create(
            endpoint=endpoint, producer=endpoint.producer, event_type=event_type
        )
    message_id = delivery.provider_message_id
    # Each with a time of the provider's (its own key per event), a minute apart.
    for minute, (body, key) in enumerate(
        (
            (postmark.delivery_event(message_id, person.email), "DeliveredAt"),
            (postmark.bounce_event(message_id, person.email, kind="SoftBounce", event_id=3),
             "BouncedAt"),
            (postmark.complaint_event(message_id, person.email), "BouncedAt"),
            (postmark.open_event(message_id, person.email), "ReceivedAt"),
            (postmark.click_event(message_id, person.email), "ReceivedAt"),
        )
    ):  # fmt: skip
        body[key] = f"2026-12-01T09:0{minute}:00Z"
        assert post_event(client, body).status_code == 200
    events = list(WebhookEvent.objects.filter(endpoint=endpoint).order_by("pk"))
    assert [e.event_type for e in events] == wanted
    for event in events:
        assert event.payload["type"] == event.event_type
        assert event.payload["data"]["delivery_id"] == delivery.pk
        assert event.payload["data"]["status"] == "reached"
        assert person.email not in json.dumps(event.payload)  # never the address
    assert [e.payload["data"]["provider_occurred_at"] for e in events] == [
        f"2026-12-01T09:0{minute}:00.000000Z" for minute in (0, 2, 3, 4)
    ]


def test_an_event_before_its_send_is_recorded_waits_and_is_given_up_as_unmatched_later(
    person, esp, client, settings, caplog
):
    """An event no delivery carries yet is kept (answered 200, nothing changed); the
    sweep applies it once a delivery carries its id, and gives up one that waited past
    NOTIFY_PROVIDER_EVENT_WAIT: logged, the provider's text dropped, nothing changed."""
    from datetime import timedelta

    from deliveries.pipeline.provider_events import early_provider_events_sweep

    settings.NOTIFY_PROVIDER_EVENT_SWEEP_BATCH = 1  # the stray one cannot hold it back
    delivery = sent(email_to(person))
    early = postmark.delivery_event("not-yet-recorded", person.email)
    stray = postmark.bounce_event("never-sent", person.email, event_id=8)
    assert post_event(client, stray).status_code == 200
    assert post_event(client, stray).status_code == 200  # replayed: kept once
    assert post_event(client, early).status_code == 200
    assert EarlyProviderEvent.objects.count() == 2 and not ProviderEvent.objects.exists()
    assert early_provider_events_sweep() == 0  # still nobody carries either id

    Delivery.objects.filter(pk=delivery.pk).update(provider_message_id="not-yet-recorded")
    assert early_provider_events_sweep() == 1
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.REACHED
    [waiting] = EarlyProviderEvent.objects.all()
    assert waiting.message_id == "never-sent" and waiting.detail

    later = timezone.now() + timedelta(seconds=settings.NOTIFY_PROVIDER_EVENT_WAIT + 1)
    with caplog.at_level(logging.WARNING, logger="deliveries.pipeline.provider_events"):
        assert early_provider_events_sweep(now=later) == 0
    assert "unknown message never-sent: unmatched, given up" in caplog.text
    waiting.refresh_from_db()
    assert waiting.given_up_at == later and waiting.detail == ""
    assert not AddressSuppression.objects.exists()
    assert early_provider_events_sweep(now=later + timedelta(days=8)) == 0
    assert not EarlyProviderEvent.objects.exists()  # kept for inspection, then dropped


def test_a_provider_event_is_recorded_and_applied_in_few_statements(person, esp):
    """Receipts and webhook events arrive once per message sent: recording one is a single
    INSERT that a replay turns into nothing, not a look-up and a savepoint around it."""
    delivery = sent(email_to(person))
    news = ProviderNews(
        esp="postmark", key="costs-1", kind=ProviderEventKind.DELIVERED,
        message_id=delivery.provider_message_id,
    )  # fmt: skip
    with CaptureQueriesContext(connection) as first:
        assert provider_event_apply(news=news) is Applied.RECORDED
    with CaptureQueriesContext(connection) as again:
        assert provider_event_apply(news=news) is Applied.REPLAY
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.REACHED
    assert ProviderEvent.objects.filter(delivery_id=delivery.pk).count() == 1

    def statements(captured: CaptureQueriesContext) -> list[str]:
        # The test's own transaction turns the function's into a savepoint: not counted.
        return [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]

    # The delivery found by its message id, the event's INSERT, the status move.
    assert len(statements(first)) == 3, statements(first)
    # A replay: the same look-up, and an INSERT that inserts nothing.
    assert len(statements(again)) == 2, statements(again)
    assert not [sql for sql in statements(first) + statements(again)
                if sql.startswith("SELECT") and "deliveries_providerevent" in sql]  # fmt: skip
