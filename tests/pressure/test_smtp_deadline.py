"""A relay that drips its greeting one byte at a time never trips SMTP's per-read timeout;
the call's total deadline ends the attempt, as a transient failure that is retried."""

from __future__ import annotations

import threading
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from deliveries.channels.email import kept_session_close
from deliveries.models import Delivery, DeliveryAttempt
from deliveries.pipeline.attempt import delivery_attempt
from notify.models import Category, Notification, Producer, Recipient
from preferences.gate import gate_seal
from tests.peers.drip import DripPeer

ORDER = {"order_number": "D-1", "delivery_date": "2026-12-03", "items_count": 1}


def attempt_in_a_sender_thread(delivery_id: int) -> None:
    try:
        delivery_attempt(delivery_id=delivery_id)
    finally:
        kept_session_close()
        connection.close()


def test_a_drip_feeding_smtp_relay_is_cut_off_at_the_calls_deadline(
    transactional_db, demo_data, settings, clean_breakers
):
    # "220 " and then hours of greeting, a byte every 0.2 s (the read timeout is 5 s).
    relay = DripPeer(b"220-" + b"a" * 100_000, every=0.2, reads_first=False)
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", relay.port, 5
    settings.NOTIFY_PROVIDER_CALL_DEADLINES = {
        **settings.NOTIFY_PROVIDER_CALL_DEADLINES,
        "smtp": 1.0,
    }
    # The retry ten minutes out: the suite's own worker sweeps due retries and would
    # otherwise send it again (to its own SMTP peer) before the checks below.
    settings.NOTIFY_EMAIL_RETRY_DELAYS = [600.0]  # inside the delivery's 1 h deadline
    person = Recipient.objects.create(user_id="drip-1", email="drip@example.com", locale="en")
    notification = Notification.objects.create(
        producer=Producer.objects.get_or_create(name="drips")[0],
        event_id="drip-1",
        recipient=person,
        category=Category.objects.get(key="order.shipped"),
        payload=ORDER,
        channels=["email"],
        fingerprint="x",
    )
    # Made as the gate makes it, without a send message: the suite's worker would
    # otherwise take it first and send it to the test's SMTP peer, not to this relay.
    now = timezone.now()
    delivery = Delivery.objects.create(
        notification=notification,
        channel="email",
        target=person.email,
        queue=notification.category.queue,
        next_attempt_at=now,
        deadline=now + timedelta(hours=1),
        gate_seal=gate_seal(notification_id=notification.pk, channel="email", target=person.email),
    )
    try:
        sender = threading.Thread(target=attempt_in_a_sender_thread, args=(delivery.pk,))
        sender.start()
        sender.join(timeout=60)  # without the deadline: the greeting takes hours
        assert not sender.is_alive(), "the sender thread is still held by the relay"
        assert relay.cut_off.wait(5), "the session with the dripping relay stayed open"
    finally:
        relay.stop()

    attempt = DeliveryAttempt.objects.get(delivery=delivery)
    assert (attempt.outcome, attempt.status_code) == ("transient", "timeout")
    delivery.refresh_from_db()
    assert delivery.status == "retrying"
