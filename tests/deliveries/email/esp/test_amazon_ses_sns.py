"""Amazon SES's events arrive through SNS: a subscription is confirmed only on Amazon SNS
itself (its SubscribeURL is fetched only from https://sns.<region>.amazonaws.com), and
SNS's first, unauthenticated post is answered with the basic auth challenge it needs."""

from __future__ import annotations

import pytest

from deliveries.api.esp_tracking.sns_signature import sns_url_allowed as subscribe_url_allowed
from deliveries.models import ProviderEvent
from tests.peers.amazon_ses import REGION, subscription_confirmation
from tests.peers.esp import SECRET, WebhookPost, email_through

HOOK = "/v1/webhooks/email/amazon_ses/tracking/"


@pytest.fixture
def ses(esp_peers, settings, db):
    return email_through(settings, esp_peers["amazon_ses"], WEBHOOK_SECRET=[SECRET])


def test_a_subscribe_url_off_amazon_sns_is_never_fetched(ses, client):
    sns = f"sns.{REGION}.amazonaws.com"
    for url in (
        f"{ses.url}confirm",  # the peer itself, on loopback: it records any fetch
        f"http://127.0.0.1:{ses.port}/?Action=ConfirmSubscription",
        f"http://{sns}/?Action=ConfirmSubscription",  # not https
        f"https://{sns}.attacker.example/?Action=ConfirmSubscription",
        f"https://attacker.example/{sns}/",
        f"https://user:pw@{sns}/",
        f"https://{sns}:8443/",
    ):
        post = ses.signed(subscription_confirmation(url))
        assert post.to_client(client, HOOK).status_code == 400, url
    assert ses.fetched == []
    assert not ProviderEvent.objects.exists()


def test_only_amazon_sns_own_subscribe_urls_are_allowed():
    assert subscribe_url_allowed(
        f"https://sns.{REGION}.amazonaws.com/?Action=ConfirmSubscription&Token=2336412f37"
    )
    assert subscribe_url_allowed("https://sns.cn-north-1.amazonaws.com.cn/?Token=x")
    assert not subscribe_url_allowed("https://sqs.us-east-1.amazonaws.com/?Token=x")
    assert not subscribe_url_allowed("https://sns.us-east-1.amazonaws.com.evil/?Token=x")
    assert not subscribe_url_allowed("https://[::1/")


def test_a_confirmation_without_credentials_is_challenged_and_not_fetched(ses, client):
    post = ses.signed(subscription_confirmation(f"https://sns.{REGION}.amazonaws.com/"))
    answer = WebhookPost(post.body, {}, post.content_type).to_client(client, HOOK)
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Basic ")
    assert ses.fetched == []
