""" "Send test to me": an email test goes to the staff account's own address with no
recipient set up, marked "[Test] " and recorded nowhere (no notification, delivery or
count); the other channels reach the staff member's own recipient through the real
channel, past the gate only under its test seal, and are never counted against the daily
marketing cap. An email test is the email a recipient would get, sent through the
configured provider (the local Postmark peer, or the SMTP peer). (SMS and push test sends
are shown in tests/deliveries/sms and tests/deliveries/push, next to their local peers.)"""

from __future__ import annotations

from datetime import date

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from deliveries.models import Delivery, DeliveryStatus, TemplateTestSend
from notify.models import FeedEntry, Notification, Recipient
from preferences.models import MarketingDayCount
from templates_admin.services import template_version_draft
from tests.peers.postmark import PostmarkPeer, email_through_peer
from tests.templates_admin.conftest import published_template, send_test

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


def test_an_email_test_goes_to_my_staff_address_marked_and_recorded_nowhere(
    editor_client, demo_data, esp
):
    # No recipient has her address, and a promo the gate would refuse anyone without
    # marketing consent: the test still goes, to the address of her staff account.
    promo = published_template("promo.weekly", "email")

    said = send_test(editor_client, promo, PROMO)

    assert said == ["Test email sent to editor@staff.example."]
    [received] = esp.received  # through the ESP, not Django's mail backend
    assert received["To"] == "editor@staff.example"
    assert received["Subject"] == "[Test] " + render_subject(promo, PROMO)
    # The footers a real marketing email carries: one-click unsubscribe and preferences.
    headers = {h["Name"]: h["Value"] for h in received["Headers"]}
    assert headers["List-Unsubscribe"].strip("<>") in received["TextBody"]
    assert "Manage your notification preferences: " in received["TextBody"]
    # A test is in no count, list or report: nothing was written.
    assert not Recipient.objects.filter(email__iexact="editor@staff.example").exists()
    assert not Notification.objects.exists()
    assert not Delivery.objects.exists()


def test_an_email_draft_test_reaches_me_over_smtp_without_any_recipient(
    editor_client, editor, demo_data, smtp, settings
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    template = published_template("order.shipped", "email")
    draft = template_version_draft(
        template=template,
        fields={"subject": "Shipped: {{ order_number }}", "html_body": "<p>On its way.</p>"},
        created_by=editor,
    )
    url = reverse("admin:templates_admin_template_send_test", args=[draft.pk])

    response = editor_client.post(url, {"locale": "en", "payload": ""})

    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Test email sent to editor@staff.example."
    ]
    [mail] = smtp.received
    assert mail.rcpt_tos == ["editor@staff.example"]
    assert mail.subject == "[Test] Shipped: A-1001"  # the draft, with the first sample
    assert not Delivery.objects.exists()


def test_a_staff_account_without_an_email_is_told_to_add_one(editor_client, editor, demo_data):
    editor.email = ""
    editor.save(update_fields=["email"])

    said = send_test(editor_client, published_template("order.shipped", "email"))

    assert said == ["Your staff account has no email address; add one first."]


def test_an_email_test_the_provider_refuses_says_why_on_the_page(editor_client, demo_data, esp):
    esp.answers.append(PostmarkPeer.invalid_request("Provide either email TextBody or HtmlBody."))

    said = send_test(editor_client, published_template("order.shipped", "email"))

    assert said == [
        "The test email was not sent: 422/300 Provide either email TextBody or HtmlBody."
    ]
    assert not Delivery.objects.exists()


def render_subject(template, payload: dict) -> str:
    from templates_admin.rendering import build_context, render_version

    context = build_context(payload, recipient={"user_id": "x", "locale": "en", "timezone": "UTC"})
    return render_version(template.published_version, context).subject
