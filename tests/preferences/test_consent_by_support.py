"""Support records a grant or withdrawal the person gave by phone: only with its own
permission, always with a reason, shown in the history, and followed by the gate."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User

from notify.models import Category, Notification, Producer, Recipient
from notify.roles import consent_group_ensure, support_group_ensure
from preferences.gate import channels_for, decide_deliveries
from preferences.models import ConsentRecord

RECORD_URL = "/admin/preferences/consentrecord/record/"
# Midday in the demo user's zone: outside any quiet hours.
NOON = datetime(2026, 1, 12, 12, 0, tzinfo=ZoneInfo("Europe/London"))


def _staff(username: str, *groups) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.groups.add(*groups)
    return user


@pytest.fixture
def support_agent(client, demo_data):
    """A support person who reads everything but may not record consent."""
    client.force_login(_staff("reader", support_group_ensure()))
    return client


@pytest.fixture
def consent_agent(client, demo_data):
    """A support person who may also record consent taken by phone."""
    client.force_login(_staff("agent.smith", support_group_ensure(), consent_group_ensure()))
    return client


def _promo_verdicts(recipient: Recipient) -> dict[str, tuple[str, str]]:
    """What the gate would do with a promo for the recipient now, per channel."""
    notification = Notification.objects.create(
        producer=Producer.objects.get_or_create(name="support-consent-check")[0],
        event_id=f"promo-{Notification.objects.count()}",
        recipient=recipient,
        category=Category.objects.get(key="promo.weekly"),
        payload={"headline": "Hi", "url": "https://shop.example"},
        fingerprint="-",
    )
    decisions = decide_deliveries(
        notification, channels=channels_for(notification), push_targets={}, now=NOON
    )
    return {d.channel: (d.status, d.reason) for d in decisions}


def _withdrawal(category: Category | None, channel: str, reason: str) -> dict[str, str]:
    return {
        "user_id": "demo-user",
        "category": str(category.pk) if category else "",
        "channel": channel,
        "decision": "withdrawn",
        "reason": reason,
    }


def test_support_without_the_permission_cannot_record_consent(support_agent):
    promo = Category.objects.get(key="promo.weekly")
    before = ConsentRecord.objects.count()

    assert support_agent.get(RECORD_URL).status_code == 403
    response = support_agent.post(RECORD_URL, _withdrawal(promo, "email", "Called to stop"))

    assert response.status_code == 403
    assert ConsentRecord.objects.count() == before
    listing = support_agent.get("/admin/preferences/consentrecord/").content.decode()
    assert "Record consent taken by support" not in listing
    recipient = Recipient.objects.get(user_id="demo-user")
    page = support_agent.get(f"/admin/notify/recipient/{recipient.pk}/change/").content.decode()
    assert "Record consent taken by support" not in page


def test_a_withdrawal_by_phone_is_in_the_history_and_the_gate_follows_it(consent_agent):
    recipient = Recipient.objects.get(user_id="demo-user")
    promo = Category.objects.get(key="promo.weekly")
    assert _promo_verdicts(recipient)["email"] == ("queued", "")  # consented at signup

    page = consent_agent.get(f"/admin/notify/recipient/{recipient.pk}/change/").content.decode()
    assert f"{RECORD_URL}?user_id=demo-user" in page
    response = consent_agent.post(
        RECORD_URL, _withdrawal(promo, "email", "Called the help line: no more promo emails")
    )

    assert response.status_code == 302
    assert response["Location"] == f"/admin/notify/recipient/{recipient.pk}/change/#consents-group"
    record = ConsentRecord.objects.filter(recipient=recipient).latest("id")
    assert (record.category, record.channel, record.granted, record.source) == (
        promo, "email", False, "support",
    )  # fmt: skip
    assert record.agent.username == "agent.smith"
    assert record.reason == "Called the help line: no more promo emails"
    history = consent_agent.get(response["Location"]).content.decode()
    assert "agent.smith" in history
    assert "Called the help line: no more promo emails" in history
    verdicts = _promo_verdicts(recipient)
    assert verdicts["email"] == ("suppressed", "opted_out")
    assert verdicts["inapp"] == ("queued", "")  # only the channel the person named


def test_withdrawing_all_marketing_on_a_channel_refuses_every_marketing_category(consent_agent):
    recipient = Recipient.objects.get(user_id="demo-user")

    response = consent_agent.post(RECORD_URL, _withdrawal(None, "email", "Asked by letter"))

    assert response.status_code == 302
    record = ConsentRecord.objects.filter(recipient=recipient).latest("id")
    assert (record.category, record.channel, record.source) == (None, "email", "support")
    verdicts = _promo_verdicts(recipient)
    assert verdicts["email"] == ("suppressed", "no_consent")
    assert verdicts["inapp"] == ("queued", "")


def test_support_cannot_record_consent_without_a_reason(consent_agent):
    promo = Category.objects.get(key="promo.weekly")
    before = ConsentRecord.objects.count()

    response = consent_agent.post(RECORD_URL, _withdrawal(promo, "email", "   "))

    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert ConsentRecord.objects.count() == before
    assert _promo_verdicts(Recipient.objects.get(user_id="demo-user"))["email"][0] == "queued"
