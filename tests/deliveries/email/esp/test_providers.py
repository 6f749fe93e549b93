"""Email through Amazon SES, SendGrid, Mailgun and Brevo (each on its HTTP peer on
loopback, through anymail's real backend for it), and each provider's events coming back
through its tracking webhook, signed as that provider signs them: every test runs once
per provider (the `esp` fixture), as tests/deliveries/email/test_esp_email.py runs them
for Postmark.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from analytics.models import AnalyticsEvent
from deliveries.checks import check_email_provider
from deliveries.models import (
    AddressSuppression,
    DeliveryAttempt,
    DeliveryStatus,
    ProviderEvent,
    Reason,
)
from preferences.models import ConsentRecord
from tests.deliveries.email.test_esp_email import PROMO, bounced_and_suppressed, email_to, sent
from tests.peers.esp import RESUBSCRIBE, EspPeer, WebhookPost

# With these empty, no provider's posts can be verified.
NO_SECRETS = {
    "WEBHOOK_SECRET": [],
    "MAILGUN_WEBHOOK_SIGNING_KEY": "",
    "SENDGRID_TRACKING_WEBHOOK_VERIFICATION_KEY": "",
}


def news(peer: EspPeer, kind: str, delivery, *, good: bool = True) -> WebhookPost:
    """The provider's webhook post of `kind` about `delivery`'s message."""
    body = peer.event(kind, delivery.provider_message_id, delivery.target)
    return peer.signed(body, good=good)


def test_an_email_goes_through_the_provider_and_keeps_its_message_id(person, esp):
    delivery = sent(email_to(person))
    assert delivery.status == DeliveryStatus.DELIVERED
    [received] = esp.received
    assert received["to"] == "Pat@Example.com"
    assert delivery.provider_message_id == received["message_id"]
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.provider_message_id == received["message_id"]


def test_delivered_then_a_hard_bounce_suppress_the_address(person, esp, client):
    first = sent(email_to(person))
    assert news(esp, "delivered", first).to_client(client, esp.hook).status_code == 200
    first.refresh_from_db()
    assert first.status == DeliveryStatus.REACHED  # the provider handed it over

    assert news(esp, "hard_bounce", first).to_client(client, esp.hook).status_code == 200
    bounced_and_suppressed(first, person, esp.received)


def test_a_soft_bounce_is_recorded_and_changes_nothing_else(person, esp, client):
    delivery = sent(email_to(person))
    assert news(esp, "soft_bounce", delivery).to_client(client, esp.hook).status_code == 200
    [event] = ProviderEvent.objects.all()
    assert (event.esp, event.kind, event.hard) == (esp.esp, "bounced", False)
    assert not AddressSuppression.objects.exists()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED


def test_a_complaint_stops_marketing_email_but_not_login_codes(person, esp, client):
    promo = sent(email_to(person, "promo.weekly", PROMO))
    assert news(esp, "complaint", promo).to_client(client, esp.hook).status_code == 200
    record = ConsentRecord.objects.filter(recipient=person).latest("id")
    assert (record.source, record.granted, record.channel) == ("spam_complaint", False, "email")

    next_promo = email_to(person, "promo.weekly", PROMO)
    assert (next_promo.status, next_promo.reason) == (DeliveryStatus.SUPPRESSED, Reason.NO_CONSENT)
    code = sent(email_to(person, "security.login_code", {"code": "482913"}))
    assert code.status == DeliveryStatus.DELIVERED
    assert len(esp.received) == 2  # the promo before, the login code after


def test_an_unsubscribe_at_the_provider_stops_marketing_email_but_not_login_codes(
    person, esp, client
):
    promo = sent(email_to(person, "promo.weekly", PROMO))
    assert news(esp, "unsubscribe", promo).to_client(client, esp.hook).status_code == 200
    [event] = ProviderEvent.objects.all()
    assert (event.kind, event.delivery_id) == ("unsubscribed", promo.pk)
    record = ConsentRecord.objects.filter(recipient=person).latest("id")
    assert (record.source, record.granted, record.channel) == ("esp_unsubscribe", False, "email")
    assert record.category is None  # all marketing on email

    next_promo = email_to(person, "promo.weekly", PROMO)
    assert (next_promo.status, next_promo.reason) == (DeliveryStatus.SUPPRESSED, Reason.NO_CONSENT)
    code = sent(email_to(person, "security.login_code", {"code": "482913"}))
    assert code.status == DeliveryStatus.DELIVERED
    assert len(esp.received) == 2  # the promo before, the login code after


def test_a_replayed_unsubscribe_changes_nothing_and_is_counted_once(person, esp, client, settings):
    settings.NOTIFY_ANALYTICS_ENABLED = True
    promo = sent(email_to(person, "promo.weekly", PROMO))
    unsubscribe = news(esp, "unsubscribe", promo)
    for _ in range(2):
        assert unsubscribe.to_client(client, esp.hook).status_code == 200
    assert ProviderEvent.objects.filter(kind="unsubscribed").count() == 1
    assert ConsentRecord.objects.filter(recipient=person, source="esp_unsubscribe").count() == 1
    [counted] = AnalyticsEvent.objects.filter(kind="unsubscribed")
    assert (counted.reason, counted.delivery_id) == ("esp_unsubscribe", promo.pk)
    assert (counted.category, counted.channel) == ("", "email")  # all marketing by email


@pytest.mark.parametrize("report", [RESUBSCRIBE])  # not made where none is posted
def test_a_resubscribe_at_the_provider_gives_no_consent_back(person, esp, client, report):
    """We never grant consent again on a provider's word: the person does that with us."""
    promo = sent(email_to(person, "promo.weekly", PROMO))
    for kind in ("unsubscribe", report):
        assert news(esp, kind, promo).to_client(client, esp.hook).status_code == 200
    assert list(ProviderEvent.objects.values_list("kind", flat=True)) == ["unsubscribed"]
    history = ConsentRecord.objects.filter(recipient=person).order_by("id")
    assert [(r.source, r.granted) for r in history] == [
        ("signup", True),
        ("esp_unsubscribe", False),
    ]
    next_promo = email_to(person, "promo.weekly", PROMO)
    assert (next_promo.status, next_promo.reason) == (DeliveryStatus.SUPPRESSED, Reason.NO_CONSENT)


def test_a_post_with_a_bad_signature_or_credentials_is_refused_and_records_nothing(
    person, esp, client, settings
):
    delivery = sent(email_to(person))
    forged = news(esp, "hard_bounce", delivery, good=False)
    assert 400 <= forged.to_client(client, esp.hook).status_code < 500
    unsigned = WebhookPost(forged.body, {}, forged.content_type)  # no credentials at all
    assert 400 <= unsigned.to_client(client, esp.hook).status_code < 500
    # Without the provider's secret configured, even a rightly signed post is refused.
    settings.ANYMAIL = {**settings.ANYMAIL, **NO_SECRETS}
    signed = news(esp, "hard_bounce", delivery)
    assert 400 <= signed.to_client(client, esp.hook).status_code < 500
    assert not ProviderEvent.objects.exists() and not AddressSuppression.objects.exists()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED


def test_a_replayed_post_changes_nothing(person, esp, client):
    delivery = sent(email_to(person))
    delivered, bounce = news(esp, "delivered", delivery), news(esp, "hard_bounce", delivery)
    for post in (delivered, delivered, bounce, bounce):
        assert post.to_client(client, esp.hook).status_code == 200
    assert sorted(ProviderEvent.objects.values_list("kind", flat=True)) == ["bounced", "delivered"]
    assert AddressSuppression.objects.count() == 1


def test_opens_and_clicks_are_recorded_without_changing_the_status(person, esp, client):
    delivery = sent(email_to(person))
    for kind in ("open", "click"):
        assert news(esp, kind, delivery).to_client(client, esp.hook).status_code == 200
    kinds = list(ProviderEvent.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds == ["opened", "clicked"]
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED


# Each provider's error answers (the peer's, as the provider gives them): the status the
# email ends in, and whether its address is suppressed.
ANSWERS = {
    "rate_limited": (DeliveryStatus.RETRYING, False),
    "unavailable": (DeliveryStatus.RETRYING, False),
    "account_refused": (DeliveryStatus.RETRYING, False),
    "bad_message": (DeliveryStatus.FAILED, False),
    "bad_address": (DeliveryStatus.FAILED, True),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_the_providers_answers_are_classified(person, esp, answer):
    esp.answers.append(getattr(esp, answer)())
    started = timezone.now()
    delivery = sent(email_to(person))
    status, suppressed = ANSWERS[answer]
    assert delivery.status == status, delivery.last_error
    assert AddressSuppression.objects.filter(address="pat@example.com").exists() == suppressed
    if answer == "rate_limited" and esp.esp != "amazon_ses":  # SES sends no wait
        wait = (delivery.next_attempt_at - started).total_seconds()
        assert 5 <= wait < 9  # the provider's 7 s, not our first step (10 s)


@pytest.mark.parametrize(
    ("provider", "anymail", "problems"),
    [
        ("amazon_ses", {"WEBHOOK_SECRET": []}, ["notify.E005"]),  # boto3's chain: no key
        ("sendgrid", {"SENDGRID_API_KEY": "k", "WEBHOOK_SECRET": [],
                      "SENDGRID_TRACKING_WEBHOOK_VERIFICATION_KEY": "public-key"}, []),
        ("mailgun", {"MAILGUN_API_KEY": "", "WEBHOOK_SECRET": ["u:p"],
                     "MAILGUN_WEBHOOK_SIGNING_KEY": ""}, ["notify.E004", "notify.E005"]),
        ("brevo", {"BREVO_API_KEY": "k", "WEBHOOK_SECRET": ["u:p"]}, []),
    ],
)  # fmt: skip
def test_the_deploy_check_wants_each_providers_key_and_webhook_secret(
    settings, provider, anymail, problems
):
    settings.NOTIFY_EMAIL_ESP = provider
    settings.ANYMAIL = anymail
    assert [c.id for c in check_email_provider()] == problems


def test_a_provider_we_do_not_speak_has_no_webhook(client, db):
    answer = client.post("/v1/webhooks/email/mandrill/tracking/", "[]", "application/json")
    assert answer.status_code == 404
