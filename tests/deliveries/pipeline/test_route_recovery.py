"""A notification whose routing failed or whose route message was lost is not lost."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from kombu import Queue

from deliveries.models import Delivery
from deliveries.pipeline.sweep import sweep_unrouted_notifications
from notify.broker import publish_task
from notify.models import Category, Notification, Outbox, Producer, Recipient
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ORDER = {"order_number": "R-1", "delivery_date": "2026-12-03", "items_count": 1}


def dead_lettered_route(broker, notification_id: str):
    """The route message for this notification now in dead_letter (left there)."""
    dead = Queue("dead_letter", no_declare=True)(broker.default_channel)
    seen, found = [], None
    while (message := dead.get(no_ack=False)) is not None:
        seen.append(message)
        if message.headers.get("task") == "deliveries.route" and message.decode()[0] == [
            notification_id
        ]:
            found = message
    for message in seen:
        message.requeue()
    return found


def route_that_raises_published(name: str) -> str:
    """Publish the route of a notification whose category's stored channel list is not a
    list (routing raises every time); its id."""
    broken = Category.objects.create(key=f"broken.{name}", default_channels=5)
    recipient = Recipient.objects.create(user_id=f"{name}-1", email=f"{name}@example.com")
    notification = Notification.objects.create(
        producer=Producer.objects.create(name=name),
        event_id=f"{name}-1",
        recipient=recipient,
        category=broken,
        payload={},
        fingerprint="x",
    )
    notification_id = str(notification.pk)
    publish_task("deliveries.route", args=[notification_id], queue="medium", priority=5)
    return notification_id


def test_a_route_that_keeps_raising_is_retried_with_backoff_then_dead_lettered(pipeline, broker):
    notification_id = route_that_raises_published("broken")

    message = wait_for(
        lambda: dead_lettered_route(broker, notification_id),
        timeout=30,
        what="the route message in dead_letter",
    )
    # Retried NOTIFY_ROUTE_MAX_RETRIES times, each a new message, then rejected to dead_letter.
    assert message.headers["retries"] == settings.NOTIFY_ROUTE_MAX_RETRIES
    assert message.headers["x-death"][0]["reason"] == "rejected"


def test_a_notification_whose_route_message_was_lost_is_routed_by_the_sweeper(pipeline, demo_data):
    smtp = pipeline
    recipient = Recipient.objects.create(user_id="lost-1", email="lost@example.com", locale="en")
    notification = Notification.objects.create(
        producer=Producer.objects.create(name="lost"),
        event_id="lost-1",
        recipient=recipient,
        category=Category.objects.get(key="order.shipped"),
        payload=ORDER,
        channels=["inapp", "email"],
        fingerprint="x",
    )
    # The relay published its route message 11 minutes ago; the broker lost it.
    published = timezone.now() - timedelta(seconds=settings.NOTIFY_ROUTE_SWEEP_AFTER + 60)
    Notification.objects.filter(pk=notification.pk).update(created_at=published)
    Outbox.objects.create(
        notification=notification,
        queue="medium",
        due_at=published,
        published_at=published,
        publish_attempts=1,
    )

    assert sweep_unrouted_notifications() == 1
    assert sweep_unrouted_notifications() == 0  # not again before another interval

    wait_for(
        lambda: (
            set(Delivery.objects.filter(notification=notification).values_list("status", flat=True))
            == {"delivered"}
        ),
        timeout=30,
        what="the swept notification delivered in-app and by email",
    )
    assert [m.rcpt_tos for m in smtp.received] == [["lost@example.com"]]
    assert recipient.feed.count() == 1


def test_route_retries_wait_twice_as_long_each_time_up_to_the_ceiling(settings):
    from deliveries.pipeline.retry import route_backoff

    settings.NOTIFY_ROUTE_RETRY_BASE, settings.NOTIFY_ROUTE_RETRY_MAX = 2.0, 60.0
    assert [route_backoff(n) for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]


def test_a_route_message_for_a_notification_that_is_gone_is_dropped_not_retried(pipeline, broker):
    missing = str(uuid.uuid4())  # erased, or never committed
    publish_task("deliveries.route", args=[missing], queue="medium", priority=5)
    # Longer than all its retries would take with the test settings' backoff.
    time.sleep(4)
    assert dead_lettered_route(broker, missing) is None
