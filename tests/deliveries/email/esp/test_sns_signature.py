"""Amazon SES's events come signed by SNS: a post is believed only when its signature
holds against a certificate fetched from Amazon SNS itself (here, the peer's own,
served on loopback, which only the test settings allow), for SignatureVersion 1 and 2.
A bad signature, a certificate from anywhere else or an unknown version is refused and
records nothing; the certificate is fetched once and kept."""

from __future__ import annotations

import json

import pytest

from deliveries.api.esp_tracking.sns_signature import cert_url_allowed, certificates_forget
from deliveries.models import Delivery, EarlyProviderEvent, ProviderEvent
from tests.deliveries.email.test_esp_email import email_to, sent
from tests.peers.amazon_ses import REGION, subscription_confirmation
from tests.peers.esp import SECRET, email_through

HOOK = "/v1/webhooks/email/amazon_ses/tracking/"


@pytest.fixture
def ses(esp_peers, settings, db, clean_breakers):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    settings.NOTIFY_PROVIDER_RATE_LIMITS = {
        **settings.NOTIFY_PROVIDER_RATE_LIMITS,
        "amazon_ses": "50:100",
    }
    certificates_forget()
    peer = email_through(settings, esp_peers["amazon_ses"], WEBHOOK_SECRET=[SECRET])
    peer.sns.fetched = 0
    yield peer
    certificates_forget()


def nothing_recorded() -> bool:
    return not ProviderEvent.objects.exists() and not EarlyProviderEvent.objects.exists()


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_signed_notification_is_applied(ses, person, client, version):
    delivery = sent(email_to(person))
    body = ses.event("delivered", delivery.provider_message_id, person.email)
    assert ses.signed(body, version=version).to_client(client, HOOK).status_code == 200
    delivery.refresh_from_db()
    assert delivery.status == "reached"


def test_a_notification_changed_after_signing_is_refused_and_records_nothing(ses, person, client):
    delivery = sent(email_to(person))
    post = ses.signed(ses.event("hard_bounce", delivery.provider_message_id, person.email))
    post.body = post.body.replace(b"Permanent", b"Transient")  # signed as Permanent
    assert post.to_client(client, HOOK).status_code == 400
    assert nothing_recorded()
    assert Delivery.objects.get(pk=delivery.pk).status == "delivered"


def test_a_certificate_off_amazon_sns_is_never_fetched(ses, person, client, settings):
    body = ses.event("delivered", "0102018c-some-message", person.email)
    for url in (
        f"https://sns.{REGION}.amazonaws.com.attacker.example/cert.pem",
        f"http://sns.{REGION}.amazonaws.com/cert.pem",  # not https
        f"https://sns.{REGION}.amazonaws.com:8443/cert.pem",
        "https://attacker.example/SimpleNotificationService-0.pem",
        f"{ses.sns.origin}/not-a-certificate",  # loopback, but not a .pem
    ):
        post = ses.signed(body, cert_url=url)
        assert post.to_client(client, HOOK).status_code == 400, url
    assert ses.sns.fetched == 0
    assert nothing_recorded()
    # Without the test setting, a loopback certificate is refused too.
    settings.NOTIFY_SNS_TEST_CERTS_ON_LOOPBACK = False
    assert ses.signed(body).to_client(client, HOOK).status_code == 400
    assert ses.sns.fetched == 0


def test_only_amazon_sns_own_certificate_urls_are_allowed(settings):
    settings.NOTIFY_SNS_TEST_CERTS_ON_LOOPBACK = False
    good = f"https://sns.{REGION}.amazonaws.com/SimpleNotificationService-abc.pem"
    assert cert_url_allowed(good)
    assert cert_url_allowed("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService.pem")
    assert not cert_url_allowed(good.replace("https", "http"))
    assert not cert_url_allowed(good.replace("sns.", "sqs."))
    assert not cert_url_allowed(f"https://user:pw@sns.{REGION}.amazonaws.com/x.pem")
    assert not cert_url_allowed(good.replace(".pem", ".txt"))
    assert not cert_url_allowed("http://127.0.0.1:8000/x.pem")


def test_an_unknown_signature_version_or_no_signature_is_refused(ses, person, client):
    body = ses.event("delivered", "0102018c-some-message", person.email)
    assert ses.signed(body, version="3").to_client(client, HOOK).status_code == 400
    unsigned = ses.signed(body)
    unsigned.body = json.dumps({**json.loads(unsigned.body), "Signature": ""}).encode()
    assert unsigned.to_client(client, HOOK).status_code == 400
    assert nothing_recorded()


def test_the_certificate_is_fetched_once_and_kept(ses, person, client):
    for _ in range(3):
        delivery = sent(email_to(person))
        body = ses.event("delivered", delivery.provider_message_id, person.email)
        assert ses.signed(body).to_client(client, HOOK).status_code == 200
    assert ses.sns.fetched == 1


def test_a_subscription_confirmation_with_a_bad_signature_is_not_confirmed(ses, client):
    confirmation = subscription_confirmation(f"https://sns.{REGION}.amazonaws.com/?Token=x")
    post = ses.signed(confirmation)
    post.body = post.body.replace(b"Token=x", b"Token=y")  # SubscribeURL is signed
    assert post.to_client(client, HOOK).status_code == 400
    assert ses.fetched == []
