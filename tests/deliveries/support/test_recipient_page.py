"""Support's recipient page: found by id, email or phone; the whole history at a glance."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt
from notify.models import Category, Notification, Producer, Recipient


@pytest.fixture
def staff_client(client, db):
    user = User.objects.create_superuser("lead", "lead@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def busy_recipient(demo_data) -> Recipient:
    """500 notifications on 3 channels each, every delivery with one attempt."""
    recipient = Recipient.objects.create(
        user_id="busy-1", email="Busy.Person@Example.com", phone="+14155550199"
    )
    producer = Producer.objects.create(name="support-tests")
    category = Category.objects.get(key="order.shipped")
    notifications = Notification.objects.bulk_create(
        Notification(
            producer=producer,
            event_id=f"e{n}",
            recipient=recipient,
            category=category,
            payload={},
            fingerprint="x",
        )
        for n in range(500)
    )
    now = timezone.now()
    deliveries = Delivery.objects.bulk_create(
        Delivery(
            notification=notification,
            channel=channel,
            target=target,
            queue="medium",
            status=status,
            reason=reason,
            attempts=1,
        )
        for notification in notifications
        for channel, target, status, reason in [
            ("inapp", "feed", "delivered", ""),
            ("email", "busy.person@example.com", "suppressed", "opted_out"),
            ("webpush", "42", "failed", "rejected"),
        ]
    )
    DeliveryAttempt.objects.bulk_create(
        DeliveryAttempt(
            delivery=delivery,
            number=1,
            started_at=now,
            duration_ms=12,
            outcome="delivered",
            status_code="201",
        )
        for delivery in deliveries
    )
    return recipient


@pytest.mark.parametrize(
    "term", ["busy-1", "busy-", "busy.person@example.com", "BUSY.P", "+1415555"]
)
def test_support_finds_a_recipient_by_id_email_or_phone(staff_client, busy_recipient, term):
    response = staff_client.get("/admin/notify/recipient/", {"q": term})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [busy_recipient]


def test_a_search_that_matches_no_prefix_finds_nobody(staff_client, busy_recipient):
    response = staff_client.get("/admin/notify/recipient/", {"q": "example.com"})
    assert list(response.context["cl"].result_list) == []


def test_the_recipient_page_shows_the_timeline_in_a_bounded_number_of_queries(
    staff_client, busy_recipient, django_assert_max_num_queries
):
    url = f"/admin/notify/recipient/{busy_recipient.pk}/change/"
    with django_assert_max_num_queries(20):
        response = staff_client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Notifications, newest first (500)" in page
    assert "The recipient opted out of this category on this channel" in page
    assert page.count('class="nt-delivery"') == 25 * 3
    with django_assert_max_num_queries(20):
        assert staff_client.get(url, {"page": 20}).status_code == 200


def test_the_notification_page_masks_sensitive_payload_fields(staff_client, demo_data):
    recipient = Recipient.objects.create(user_id="otp-1", email="otp@example.com")
    notification = Notification.objects.create(
        producer=Producer.objects.create(name="auth"),
        event_id="otp-1",
        recipient=recipient,
        category=Category.objects.get(key="security.login_code"),
        payload={"code": "271828"},
        fingerprint="x",
    )
    Delivery.objects.create(
        notification=notification,
        channel="email",
        target="otp@example.com",
        queue="high",
        status="delivered",
        attempts=1,
    )
    page = staff_client.get(f"/admin/notify/notification/{notification.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "271828" not in text
    assert "•••" in text
    assert "otp@example.com" in text  # every delivery is listed
