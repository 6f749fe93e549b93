"""A slow SMTP relay holds email's senders only: a login code by SMS on the same queue
class goes while the slow emails are still on their way, and the emails all arrive, once
each, when the relay is fast again — having waited for a sender in the worker, not gone
back and forth through the broker. On the shipped pool (threads) of a real worker."""

from __future__ import annotations

import uuid

from django.conf import settings
from kombu import Queue

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Notification, Producer, Recipient
from tests.waiting import wait_for

THREADS = 4
SLOW_EMAILS = 6  # more than the worker's threads: without a bound they take them all
SMTP_DELAY = 2.0  # seconds the relay takes per message (the real case: 20 s or more)


def _login_code(*, recipient: Recipient, channel: str) -> Notification:
    producer, _ = Producer.objects.get_or_create(name="isolation-tests")
    return Notification.objects.create(
        producer=producer,
        event_id=str(uuid.uuid4()),
        recipient=recipient,
        category=Category.objects.get(key="security.login_code"),
        payload={"code": "135790"},
        channels=[channel],
        fingerprint="isolation-tests",
    )


def _email_sends(tap) -> int:
    """Send messages of email published to `high` since the last look (the tap's copies)."""
    count = 0
    while (message := tap.get(no_ack=True)) is not None:
        if message.headers.get("task") == "deliveries.send":
            count += message.decode()[1].get("channel") == "email"
    return count


def test_a_slow_smtp_relay_never_holds_a_login_code_by_sms(
    smsc, login_code_for_worker, workers_with, broker
):
    smtp = login_code_for_worker.smtp
    workers_with(
        queues="high",
        pool="threads",
        concurrency=THREADS,
        WORKER_CONCURRENCY=str(THREADS),
        NOTIFY_CHANNEL_SLOW_SECONDS="0.5",
    )
    # A private queue bound like `high` sees every message published to it.
    tap = Queue(
        f"tap-high-{uuid.uuid4().hex[:8]}",
        settings.NOTIFY_EXCHANGE,
        routing_key="high",
        exclusive=True,
        auto_delete=True,
    )(broker.default_channel)
    tap.declare()
    smtp.handler.data_delay = SMTP_DELAY
    people = [
        Recipient.objects.create(user_id=f"slow-mail-{n}", email=f"slow{n}@example.com")
        for n in range(SLOW_EMAILS)
    ]
    # The emails are queued first, each to its own person (one person's emails would go
    # one after another anyway), then the SMS, behind them on `high`.
    emails = [_login_code(recipient=person, channel="email") for person in people]
    for notification in emails:
        notification_route(notification_id=str(notification.pk))
    sms = login_code_for_worker("246810")
    notification_route(notification_id=str(sms.pk))

    wait_for(lambda: smsc.accepted(), what="the login code's submit_sm", timeout=30)
    # No email had been answered when the SMS went: it never waited for the slow relay.
    assert smtp.handler.data_calls == [], "the SMS waited behind the slow SMTP relay"

    smtp.handler.data_delay = 0.0  # the relay is fast again: the backlog drains

    def delivered() -> int:
        return Delivery.objects.filter(
            notification__in=emails, channel="email", status=DeliveryStatus.DELIVERED
        ).count()

    wait_for(lambda: delivered() == SLOW_EMAILS, what="every email delivered", timeout=60)
    # Nothing lost and nothing sent twice while the emails waited for a sender.
    got = sorted(rcpt for mail in smtp.received for rcpt in mail.rcpt_tos)
    assert got == sorted(person.email for person in people)
    # Each email's send message was published once: those without a sender waited in
    # the worker for one instead of coming back through the broker.
    assert _email_sends(tap) == SLOW_EMAILS
