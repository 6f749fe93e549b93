"""A re-driven delivery gets a fresh deadline on every channel, and a delivery released
after quiet hours is not sent to an address that bounced hard meanwhile."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deliveries.models import AddressSuppression, Delivery, DeliveryStatus, Reason
from deliveries.pipeline.redrive import deliveries_redrive
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient

ORDER = {"order_number": "R-1", "delivery_date": "2026-12-03", "items_count": 1}


@pytest.fixture
def person(demo_data):
    return Recipient.objects.create(
        user_id="r1", email="r1@example.com", phone="+14155550199", locale="en"
    )


def routed(person: Recipient, channels: list[str], category: str = "order.shipped") -> Notification:
    producer, _ = Producer.objects.get_or_create(name="redrive")
    notification = Notification.objects.create(
        producer=producer,
        event_id=f"e{Notification.objects.count()}",
        recipient=person,
        category=Category.objects.get(key=category),
        payload=ORDER,
        channels=channels,
        fingerprint="x",
    )
    notification_route(notification_id=str(notification.pk))
    return notification


def test_a_redriven_delivery_on_every_channel_gets_a_fresh_deadline(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "sms"]
    Category.objects.filter(key="order.shipped").update(ttl_seconds=None)
    settings.NOTIFY_CHANNEL_DEADLINE_SECONDS = {
        "inapp": 1000,
        "email": 2000,
        "sms": 3000,
        "webpush": 4000,
        "fcm": 5000,
    }
    notification = routed(person, ["email", "sms"])
    rows = Delivery.objects.filter(notification=notification)
    long_ago = timezone.now() - timedelta(days=2)
    # Both died a day after their deadlines passed; the operator fixed the provider since.
    rows.update(status=DeliveryStatus.DEAD, reason=Reason.RETRIES_EXHAUSTED, deadline=long_ago)
    staff = User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)

    before = timezone.now()
    assert deliveries_redrive(delivery_ids=rows.values_list("pk", flat=True), by=staff) == 2

    fresh = {row.channel: row for row in rows}
    assert {channel: row.status for channel, row in fresh.items()} == {
        "email": DeliveryStatus.QUEUED,
        "sms": DeliveryStatus.QUEUED,
    }
    for channel, seconds in (("email", 2000), ("sms", 3000)):
        deadline = fresh[channel].deadline
        assert before + timedelta(seconds=seconds) <= deadline
        assert deadline <= timezone.now() + timedelta(seconds=seconds)


def test_a_redriven_login_code_is_good_for_its_own_ttl_again_not_a_day(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "sms"]
    code = routed(person, ["email", "sms"], category="security.login_code")
    rows = Delivery.objects.filter(notification=code)
    rows.update(status=DeliveryStatus.DEAD, deadline=timezone.now() - timedelta(hours=1))
    staff = User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)

    deliveries_redrive(delivery_ids=rows.values_list("pk", flat=True), by=staff)

    for row in rows:
        assert row.deadline - timezone.now() <= timedelta(minutes=10)
        assert row.deadline > timezone.now() + timedelta(minutes=9)


def test_a_deferred_email_released_after_its_address_bounced_is_suppressed_not_sent(
    person, settings
):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    notification = routed(person, ["email"])
    email = Delivery.objects.get(notification=notification, channel="email")
    window_end = timezone.now() + timedelta(minutes=5)
    Delivery.objects.filter(pk=email.pk).update(
        status=DeliveryStatus.DEFERRED,
        reason=Reason.QUIET_HOURS,
        next_attempt_at=window_end,
        enqueued_at=None,
    )
    # While it waited, another email to the same address bounced hard.
    AddressSuppression.objects.create(
        channel="email", address="r1@example.com", evidence="550 5.1.1 no such user"
    )

    assert deferred_release(now=window_end) == 0

    email.refresh_from_db()
    assert (email.status, email.reason) == (DeliveryStatus.SUPPRESSED, Reason.ADDRESS_SUPPRESSED)
    assert email.finished_at == window_end
    assert email.attempts == 0
