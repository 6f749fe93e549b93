""" "Send test to me": the version reaches the staff member's own recipient through the
real channel, past the gate only under its test seal, and is never counted against the
daily marketing cap. An email test is the email the recipient would get, sent through the
configured provider (here the local Postmark peer) and recorded like any delivery. (SMS
and push test sends are shown in tests/sms and tests/push, next to their local peers.)"""

from __future__ import annotations

from datetime import date

import pytest

from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus, TemplateTestSend
from notify.models import FeedEntry, Notification, Recipient
from preferences.models import MarketingDayCount
from tests.peers.postmark import PostmarkPeer, email_through_peer
from tests.templates.conftest import published_template, send_test

PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}


@pytest.fixture
def esp(postmark_peer, settings, clean_breakers):
    """Email goes through the Postmark peer, as with NOTIFY_EMAIL_ESP=postmark."""
    return email_through_peer(settings, postmark_peer)


def test_an_inapp_test_lands_in_my_feed_marked_as_a_test_and_past_the_cap(
    editor_client, editor, me, settings
):
    # A promo the gate would refuse her: no marketing consent, and today's cap is used up.
    MarketingDayCount.objects.create(
        recipient=me, local_date=date.today(), count=settings.NOTIFY_MARKETING_DAILY_CAP
    )
    promo = published_template("promo.weekly", "inapp")

    said = send_test(editor_client, promo, PROMO)

    assert said == ["Test inapp written to the feed of recipient ed-1."]
    [entry] = FeedEntry.objects.filter(recipient=me)
    assert (entry.title, entry.url) == ("[Test] Winter sale", "https://shop.example/sale")
    marker = TemplateTestSend.objects.get(notification=entry.notification)
    assert (marker.version_id, marker.requested_by) == (promo.published_version_id, editor)
    [delivery] = Delivery.objects.filter(notification=entry.notification)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 1)
    # Not counted against the cap (the gate was not asked).
    counts = MarketingDayCount.objects.filter(recipient=me).values_list("count", flat=True)
    assert list(counts) == [settings.NOTIFY_MARKETING_DAILY_CAP]


def test_a_staff_member_with_no_linked_recipient_is_told_how_to_link_one(editor_client, demo_data):
    said = send_test(editor_client, published_template("order.shipped", "inapp"))

    assert said == [
        "No recipient has your staff email (editor@staff.example): register yourself as a "
        "user with that email (PUT /v1/users/{user_id}) to receive test sends."
    ]
    assert not Notification.objects.exists()


def test_an_sms_test_to_a_recipient_without_a_phone_sends_nothing(editor_client, me, settings):
    settings.NOTIFY_CHANNELS_ENABLED = [*settings.NOTIFY_CHANNELS_ENABLED, "sms"]
    Recipient.objects.filter(pk=me.pk).update(phone="")

    said = send_test(editor_client, published_template("security.login_code", "sms"), {"code": "1"})

    assert said == ["Recipient ed-1 has no phone number."]
    assert not Delivery.objects.exists()


def test_an_email_test_is_the_real_email_through_the_configured_provider_and_recorded(
    editor_client, editor, me, esp
):
    # A promo the gate would refuse her (no marketing consent): the test still goes.
    promo = published_template("promo.weekly", "email")

    said = send_test(editor_client, promo, PROMO)

    assert said == ["Test email sent to Editor@Staff.Example."]
    [received] = esp.received  # through the ESP, not Django's mail backend
    assert received["To"] == "Editor@Staff.Example"
    # The footers a real marketing email carries: one-click unsubscribe and preferences.
    headers = {h["Name"]: h["Value"] for h in received["Headers"]}
    assert headers["List-Unsubscribe"].strip("<>") in received["TextBody"]
    assert "Manage your notification preferences: " in received["TextBody"]
    # Recorded as a delivery of a test send, with the provider's message id.
    [delivery] = Delivery.objects.filter(notification__recipient=me, channel="email")
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 1)
    assert delivery.provider_message_id == received["MessageID"]
    assert DeliveryAttempt.objects.filter(delivery=delivery).count() == 1
    marker = TemplateTestSend.objects.get(notification=delivery.notification)
    assert (marker.version_id, marker.requested_by) == (promo.published_version_id, editor)


def test_an_email_test_the_provider_refuses_says_why_on_the_page(editor_client, me, esp):
    esp.answers.append(PostmarkPeer.invalid_request("Provide either email TextBody or HtmlBody."))

    said = send_test(editor_client, published_template("order.shipped", "email"))

    assert said == [
        "The test email was not sent: 422/300 Provide either email TextBody or HtmlBody."
    ]
    delivery = Delivery.objects.get(notification__recipient=me, channel="email")
    assert delivery.status == DeliveryStatus.FAILED
