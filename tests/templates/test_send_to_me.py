""" "Send test to me": the version reaches the staff member's own recipient through the
real channel, past the gate only under its test seal, and is never counted against the
daily marketing cap. (SMS and push test sends are shown in tests/sms and tests/push, next
to their local peers.)"""

from __future__ import annotations

from datetime import date

from deliveries.models import Delivery, DeliveryStatus, TemplateTestSend
from notify.models import FeedEntry, Notification, Recipient
from preferences.models import MarketingDayCount
from tests.templates.conftest import published_template, send_test

PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}


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
