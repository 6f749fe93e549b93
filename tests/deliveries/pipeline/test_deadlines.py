"""Every channel has a deadline, and nothing is sent after it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus, Device, Reason
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.release import deferred_release
from deliveries.pipeline.retry import RetryKind, decide_retry
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient

ORDER = {"order_number": "A-1", "delivery_date": "2026-12-03", "items_count": 1}
PROMO = {"headline": "Winter sale", "url": "https://shop.example/sale"}


@pytest.fixture
def person(demo_data):
    return Recipient.objects.create(
        user_id="d1", email="d1@example.com", phone="+14155550123", locale="en"
    )


def notify(person, category: str, payload: dict, *, ttl: int | None = None, **extra):
    producer, _ = Producer.objects.get_or_create(name="deadlines")
    return Notification.objects.create(
        producer=producer,
        event_id=f"e{Notification.objects.count()}",
        recipient=person,
        category=Category.objects.get(key=category),
        payload=payload,
        ttl_seconds=ttl,
        fingerprint="x",
        **extra,
    )


def deadlines(notification) -> dict[str, timedelta]:
    return {
        d.channel: d.deadline - notification.created_at
        for d in Delivery.objects.filter(notification=notification)
    }


def test_every_channel_ends_at_the_notification_ttl_else_the_category_else_its_default(
    person, settings
):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "sms", "webpush"]
    channels = ["inapp", "email", "sms", "webpush"]

    own = notify(person, "order.shipped", ORDER, ttl=120, channels=channels)
    notification_route(notification_id=str(own.pk))
    assert set(deadlines(own).values()) == {timedelta(seconds=120)}

    # A category's TTL applies where it is shorter than the channel's own deadline.
    Category.objects.filter(key="order.shipped").update(ttl_seconds=7200)
    of_category = notify(person, "order.shipped", ORDER, channels=channels)
    notification_route(notification_id=str(of_category.pk))
    assert deadlines(of_category) == {
        "inapp": timedelta(seconds=7200),
        "email": timedelta(seconds=7200),
        "sms": timedelta(hours=1),
        "webpush": timedelta(hours=1),
    }

    Category.objects.filter(key="order.shipped").update(ttl_seconds=None)
    settings.NOTIFY_CHANNEL_DEADLINE_SECONDS = {
        "inapp": 1000,
        "email": 2000,
        "sms": 3000,
        "webpush": 4000,
        "fcm": 5000,
    }
    default = notify(person, "order.shipped", ORDER, channels=channels)
    notification_route(notification_id=str(default.pk))
    assert deadlines(default) == {
        "inapp": timedelta(seconds=1000),
        "email": timedelta(seconds=2000),
        "sms": timedelta(seconds=3000),
        "webpush": timedelta(seconds=4000),
    }


def test_a_push_is_not_worth_sending_after_an_hour_by_default(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "webpush", "fcm"]
    Device.objects.create(
        recipient=person,
        kind="webpush",
        endpoint="https://push.example/d1",
        p256dh="k",
        auth="a",
    )
    Device.objects.create(recipient=person, kind="fcm", token="t1", platform="android")
    Category.objects.filter(key="order.shipped").update(ttl_seconds=None)
    shipped = notify(person, "order.shipped", ORDER)
    notification_route(notification_id=str(shipped.pk))

    found = deadlines(shipped)
    assert found["webpush"] <= timedelta(hours=1)
    assert found["fcm"] <= timedelta(hours=1)
    assert found["email"] == timedelta(hours=24)


def test_a_three_day_category_ttl_still_ends_email_after_a_day_and_push_after_an_hour(
    person, settings
):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "webpush"]
    Device.objects.create(
        recipient=person,
        kind="webpush",
        endpoint="https://push.example/d1",
        p256dh="k",
        auth="a",
    )
    Category.objects.filter(key="promo.weekly").update(ttl_seconds=3 * 24 * 3600)
    promo = notify(person, "promo.weekly", PROMO)
    notification_route(notification_id=str(promo.pk))

    assert deadlines(promo) == {
        "inapp": timedelta(days=3),
        "email": timedelta(hours=24),
        "webpush": timedelta(hours=1),
    }


def test_a_category_ttl_shorter_than_every_channel_default_wins_everywhere(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "webpush"]
    Device.objects.create(
        recipient=person,
        kind="webpush",
        endpoint="https://push.example/d1",
        p256dh="k",
        auth="a",
    )
    Category.objects.filter(key="promo.weekly").update(ttl_seconds=900)
    promo = notify(person, "promo.weekly", PROMO)
    notification_route(notification_id=str(promo.pk))

    assert set(deadlines(promo).values()) == {timedelta(minutes=15)}


def test_the_demo_promo_leaves_each_channel_its_own_deadline(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "webpush"]
    Device.objects.create(
        recipient=person,
        kind="webpush",
        endpoint="https://push.example/d1",
        p256dh="k",
        auth="a",
    )
    promo = notify(person, "promo.weekly", PROMO)
    notification_route(notification_id=str(promo.pk))

    assert deadlines(promo) == {
        "inapp": timedelta(days=7),
        "email": timedelta(hours=24),
        "webpush": timedelta(hours=1),
    }


def test_a_login_code_is_good_for_ten_minutes_on_every_channel(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "sms"]
    code = notify(person, "security.login_code", {"code": "123456"})
    notification_route(notification_id=str(code.pk))
    assert deadlines(code) == {"email": timedelta(minutes=10), "sms": timedelta(minutes=10)}


def test_a_login_code_routed_after_its_ttl_is_expired_and_never_sent(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email", "sms"]
    code = notify(person, "security.login_code", {"code": "123456"})
    # The relay was away for 11 minutes: the code is routed only now.
    Notification.objects.filter(pk=code.pk).update(
        created_at=timezone.now() - timedelta(minutes=11)
    )
    notification_route(notification_id=str(code.pk))

    rows = Delivery.objects.filter(notification=code)
    assert {(d.channel, d.status, d.reason) for d in rows} == {
        ("email", "expired", "deadline_passed"),
        ("sms", "expired", "deadline_passed"),
    }
    assert all(d.enqueued_at is None and d.attempts == 0 for d in rows)


def test_an_email_whose_deadline_passes_before_its_send_is_expired_not_sent(person, smtp, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    code = notify(person, "security.login_code", {"code": "123456"}, channels=["email"])
    notification_route(notification_id=str(code.pk))
    email = Delivery.objects.get(notification=code, channel="email")
    # Its retry comes after the ten minutes (the worker was backed up).
    Delivery.objects.filter(pk=email.pk).update(deadline=timezone.now() - timedelta(seconds=1))

    delivery_attempt(delivery_id=email.pk)

    email.refresh_from_db()
    assert (email.status, email.reason) == (DeliveryStatus.EXPIRED, Reason.DEADLINE_PASSED)
    assert DeliveryAttempt.objects.get(delivery=email).status_code == "deadline"
    assert smtp.received == []


def test_sms_retries_on_its_own_schedule_and_runs_out_after_it(settings):
    settings.NOTIFY_EMAIL_RETRY_DELAYS = [10, 60, 300, 1800, 7200]
    settings.NOTIFY_SMS_RETRY_DELAYS = [5, 30]
    settings.NOTIFY_RETRY_JITTER = 0
    now = timezone.now()

    def after(channel: str, attempt: int):
        return decide_retry(channel=channel, attempt=attempt, now=now, deadline=None)

    assert [after("sms", n).delay for n in (1, 2)] == [5, 30]
    assert after("sms", 3).kind is RetryKind.EXHAUSTED
    assert after("email", 3).delay == 300


def test_a_retry_already_past_its_deadline_is_expired_even_with_no_retries_left(settings):
    settings.NOTIFY_SMS_RETRY_DELAYS = [5]
    now = timezone.now()
    late = decide_retry(channel="sms", attempt=2, now=now, deadline=now - timedelta(seconds=1))
    assert late.kind is RetryKind.PAST_DEADLINE


def test_a_deferred_delivery_released_after_its_deadline_ends_expired(person, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    order = notify(person, "order.shipped", ORDER, ttl=3600, channels=["email"])
    notification_route(notification_id=str(order.pk))
    email = Delivery.objects.get(notification=order, channel="email")
    # Quiet hours held it; the window ends after the notification's TTL.
    window_end = email.deadline + timedelta(minutes=5)
    Delivery.objects.filter(pk=email.pk).update(
        status=DeliveryStatus.DEFERRED,
        reason=Reason.QUIET_HOURS,
        next_attempt_at=window_end,
        enqueued_at=None,
    )

    assert deferred_release(now=window_end) == 0

    email.refresh_from_db()
    assert (email.status, email.reason) == (DeliveryStatus.EXPIRED, Reason.DEADLINE_PASSED)
    assert email.finished_at == window_end
    assert email.deadline == order.created_at + timedelta(seconds=3600)  # kept, not cleared


def test_the_category_admin_says_which_deadline_applies_on_each_channel(demo_data):
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    Category.objects.filter(key="promo.weekly").update(ttl_seconds=3 * 24 * 3600)
    promo = Category.objects.get(key="promo.weekly")
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@staff.example", "pw"))

    page = client.get(reverse("admin:notify_category_change", args=[promo.pk])).content.decode()

    assert "inapp: 3 d (this category&#x27;s TTL)" in page
    assert "email: 24 h (the channel&#x27;s default)" in page
    assert "webpush: 1 h (the channel&#x27;s default)" in page
