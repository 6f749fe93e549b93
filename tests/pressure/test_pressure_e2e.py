"""Slowing down instead of losing and not hammering a provider that is down,
through real worker processes, the real broker and a real SMTP server."""

from __future__ import annotations

import time

import pytest
from django.db import transaction
from kombu import Queue

from deliveries.models import Delivery
from notify.models import Category, Producer, QueueClass, Recipient
from notify.services import notification_accept
from templates_admin.models import Template
from templates_admin.services import template_version_create, template_version_publish
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

ORDER = {"order_number": "P-1", "delivery_date": "2026-12-03", "items_count": 1}


def accept_many(count: int, *, category: str = "order.shipped", payload=None, prefix: str):
    producer, _ = Producer.objects.get_or_create(name="pressure")
    category_row = Category.objects.get(key=category)
    recipients = [
        Recipient.objects.get_or_create(
            user_id=f"{prefix}-{n}", defaults={"email": f"{prefix}-{n}@example.com", "locale": "en"}
        )[0]
        for n in range(count)
    ]
    for n, recipient in enumerate(recipients):
        with transaction.atomic():
            notification_accept(
                producer=producer,
                event_id=f"{prefix}-{n}",
                user_id=recipient.user_id,
                category=category_row,
                payload=payload or ORDER,
                channels=["email"],
                ttl_seconds=None,
            )


def test_a_shared_rate_limit_slows_two_workers_down_and_loses_nothing(
    workers_with, pipeline, demo_data
):
    smtp = pipeline
    workers_with(count=2, NOTIFY_RATE_SMTP="20:5")
    accept_many(200, prefix="rl")

    wait_for(lambda: len(smtp.received) >= 200, timeout=60, what="200 emails")
    calls = smtp.handler.data_calls
    assert calls[-1] - calls[0] >= 9.5  # 195 tokens after the burst of 5, at 20/s
    assert len({mail.rcpt_tos[0] for mail in smtp.received}) == 200
    wait_for(
        lambda: not Delivery.objects.filter(channel="email").exclude(status="delivered").exists(),
        what="every outcome to be recorded as delivered",
    )


@pytest.fixture
def low_digest(demo_data) -> Category:
    """A non-marketing category on the low queue, so only the queue class differs."""
    category = Category.objects.create(
        key="digest.daily",
        queue=QueueClass.LOW,
        default_channels=["email"],
        payload_schema={},
        sample_payloads=[{}],
    )
    template = Template.objects.create(category=category, channel="email", locale="en")
    version = template_version_create(
        template=template, fields={"subject": "Your digest", "html_body": "<p>Digest</p>"}
    )
    template_version_publish(version=version)
    return category


def test_a_login_code_is_not_delayed_by_a_throttled_campaign(workers_with, pipeline, low_digest):
    smtp = pipeline
    # Separate pools per queue, as in production; 5 tokens/s shared by both.
    workers_with(queues="low", NOTIFY_RATE_SMTP="5:5")
    workers_with(queues="high", NOTIFY_RATE_SMTP="5:5")
    accept_many(40, category="digest.daily", payload={}, prefix="bulk")
    wait_for(lambda: len(smtp.received) >= 6, what="the campaign to saturate the limit")

    accept_many(1, category="security.login_code", payload={"code": "424242"}, prefix="otp")
    sent = time.time()
    login = wait_for(
        lambda: [m for m in smtp.received if m.rcpt_tos == ["otp-0@example.com"]],
        what="the login code",
    )[0]
    assert login.received_at - sent < 1.5  # a token interval is 0.2 s; the rest is travel
    still_waiting = Delivery.objects.filter(
        notification__category=low_digest, status__in=["queued", "retrying", "sending"]
    ).count()
    assert still_waiting > 10  # the campaign was still being throttled meanwhile


def test_an_open_breaker_spares_a_failing_relay_and_everything_is_delivered_after(
    workers_with, pipeline, broker, demo_data
):
    smtp = pipeline
    workers_with(
        NOTIFY_BREAKER_FAILURES="3",
        NOTIFY_BREAKER_WINDOW="10",
        NOTIFY_BREAKER_COOLDOWN="1",
        NOTIFY_RATE_SMTP="1000:1000",
    )
    smtp.handler.default_data_answer = "421 4.3.2 Service shutting down"
    outage_started = time.time()
    accept_many(10, prefix="br")
    time.sleep(5)
    calls_during_outage = len(smtp.handler.data_calls)
    smtp.handler.default_data_answer = "250 OK"  # the relay is back

    wait_for(lambda: len(smtp.received) >= 10, timeout=40, what="all 10 after recovery")
    outage = time.time() - outage_started
    # 3 failures open it, the worker's other process may have one call in flight, then
    # at most one probe per 1 s cool-down.
    assert calls_during_outage <= 3 + 1 + int(outage) + 1, smtp.handler.data_calls
    wait_for(
        lambda: Delivery.objects.filter(channel="email", status="delivered").count() == 10,
        what="all 10 recorded as delivered",
    )
    assert Delivery.objects.filter(channel="email", status="dead").count() == 0
    ours = set(Delivery.objects.values_list("pk", flat=True))
    assert not ours & set(dead_lettered_delivery_ids(broker))


def dead_lettered_delivery_ids(broker) -> list[int]:
    """Delivery ids of the send messages now in dead_letter (left there, not consumed)."""
    dead = Queue("dead_letter", no_declare=True)(broker.default_channel)
    ids, seen = [], []
    while (message := dead.get(no_ack=False)) is not None:
        seen.append(message)
        if message.headers.get("task") == "deliveries.send":
            ids.extend(message.decode()[0])
    for message in seen:
        message.requeue()
    return ids
