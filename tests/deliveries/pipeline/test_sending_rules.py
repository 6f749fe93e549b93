"""Rules of sending, called directly: retry timing, the gate's verdicts and its seal."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from config.celery import app
from deliveries.models import Delivery, DeliveryAttempt, DeliveryStatus
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.enqueue import ROUTE_TASK
from deliveries.pipeline.outcome import AttemptResult
from deliveries.pipeline.retry import RetryKind, decide_retry
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient
from tests.conftest import ROOT


def test_email_retry_delays_grow_with_jitter_and_run_out(settings):
    settings.NOTIFY_EMAIL_RETRY_DELAYS = [10, 60, 300, 1800, 7200]
    settings.NOTIFY_RETRY_JITTER = 0.2
    now = timezone.now()
    rng = random.Random(7)
    delays = [
        decide_retry(channel="email", attempt=n, now=now, deadline=None, rng=rng).delay
        for n in range(1, 6)
    ]
    for delay, base in zip(delays, [10, 60, 300, 1800, 7200], strict=True):
        assert base * 0.8 <= delay <= base * 1.2
    assert delays == sorted(delays)
    assert (
        len({round(d / b, 6) for d, b in zip(delays, [10, 60, 300, 1800, 7200], strict=True)}) > 1
    )
    exhausted = decide_retry(channel="email", attempt=6, now=now, deadline=None)
    assert exhausted.kind is RetryKind.EXHAUSTED


def test_retry_after_longer_than_the_backoff_wins_and_the_deadline_expires(settings):
    settings.NOTIFY_EMAIL_RETRY_DELAYS = [10]
    now = timezone.now()
    longer = decide_retry(channel="email", attempt=1, now=now, deadline=None, retry_after=90)
    assert longer.delay == 90
    late = decide_retry(channel="email", attempt=1, now=now, deadline=now + timedelta(seconds=5))
    assert late.kind is RetryKind.PAST_DEADLINE


@pytest.fixture
def order(demo_data):
    producer = Producer.objects.create(name="rules")
    recipient = Recipient.objects.create(user_id="r1", email="", locale="en")
    return Notification.objects.create(
        producer=producer,
        event_id="e1",
        recipient=recipient,
        category=Category.objects.get(key="order.shipped"),
        payload={"order_number": "1", "delivery_date": "2026-12-01", "items_count": 1},
        channels=["inapp", "email", "sms"],
        fingerprint="x",
    )


def test_channels_without_an_address_or_provider_are_recorded_with_a_reason(order, settings):
    settings.NOTIFY_CHANNELS_ENABLED = ["inapp", "email"]
    order.recipient.phone = "+14155550123"
    order.recipient.save()
    notification_route(notification_id=str(order.pk))
    rows = {d.channel: d for d in Delivery.objects.filter(notification=order)}
    assert rows["inapp"].status == DeliveryStatus.DELIVERED
    assert (rows["email"].status, rows["email"].reason) == ("suppressed", "no_address")
    assert (rows["sms"].status, rows["sms"].reason) == ("suppressed", "channel_unavailable")


def test_routing_twice_creates_nothing_new(order):
    notification_route(notification_id=str(order.pk))
    notification_route(notification_id=str(order.pk))
    assert Delivery.objects.filter(notification=order).count() == 3
    assert order.recipient.feed.count() == 1


def test_the_sender_refuses_a_delivery_that_did_not_come_through_the_gate(order):
    forged = Delivery.objects.create(
        notification=order,
        channel="inapp",
        target="feed",
        queue="medium",
        next_attempt_at=timezone.now(),
    )
    report = delivery_attempt(delivery_id=forged.pk)
    forged.refresh_from_db()
    assert report.result is AttemptResult.FAILED
    assert (forged.status, forged.reason) == ("failed", "not_gated")
    assert order.recipient.feed.count() == 0
    assert DeliveryAttempt.objects.get(delivery=forged).outcome == "permanent"


def test_every_beat_job_names_a_registered_task():
    app.loader.import_default_modules()
    for name, job in app.conf.beat_schedule.items():
        assert job["task"] in app.tasks, name


def test_the_outbox_relay_publishes_to_the_route_task(settings):
    # The core's relay is told the task by the project's settings, not by importing it.
    app.loader.import_default_modules()
    assert settings.NOTIFY_OUTBOX_TASK == ROUTE_TASK
    assert app.tasks[ROUTE_TASK].name == ROUTE_TASK


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DATABASE_URL", "mysql://db/notify"),
        ("CELERY_BROKER_URL", "amqp//nohost"),
        ("REDIS_URL", "http://127.0.0.1:6379"),
        ("EMAIL_PORT", "twenty-five"),
        ("NOTIFY_EMAIL_RETRY_DELAYS", "10,soon"),
        ("DJANGO_DEBUG", "perhaps"),
    ],
)
def test_a_bad_setting_stops_the_start_naming_the_variable(variable, value):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings", variable: value},
    )
    assert result.returncode != 0
    assert variable in result.stderr
