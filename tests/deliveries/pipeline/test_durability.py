"""Nothing is lost when a process dies or a message goes missing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from kombu import Queue

from config.celery import app
from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.routing import notification_route
from deliveries.pipeline.sweep import sweep_due_deliveries
from notify.models import Notification, Outbox, Recipient
from tests.conftest import ROOT, session_relay_running
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_a_process_killed_between_commit_and_publish_loses_nothing(
    pipeline, producer_key, worker_env, outbox_relay
):
    """The web process dies right after its commit while no relay runs: the outbox row
    waits, and the relay publishes it when it (re)starts."""
    smtp = pipeline
    outbox_relay.kill()
    Recipient.objects.create(user_id="k1", email="k1@example.com", locale="en")
    died = subprocess.run(
        [sys.executable, "-m", "tests.scripts.accept_then_die", "shop", "k1", "crash-1"],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        timeout=60,
    )
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]

    notification = Notification.objects.get(event_id="crash-1")
    assert Outbox.objects.get(notification=notification).published_at is None
    assert not smtp.received

    outbox_relay.start()
    mail = wait_for(lambda: smtp.received, what="the email once the relay runs")[0]
    assert mail.subject == "Order K-9 has shipped"
    wait_for(
        lambda: Outbox.objects.get(notification=notification).published_at is not None,
        what="the outbox row marked published",
    )


def test_a_relay_killed_between_confirm_and_commit_sends_once(
    pipeline, producer_key, worker_env, outbox_relay
):
    """The relay dies after the broker confirmed the route message but before it marked
    the row: the row is published again, and the notification is still sent once."""
    smtp = pipeline
    outbox_relay.kill()
    Recipient.objects.create(user_id="k2", email="k2@example.com", locale="en")
    accepted = subprocess.run(
        [sys.executable, "-c", ACCEPT_ONE],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        timeout=60,
    )
    assert accepted.returncode == 0, accepted.stderr.decode()[-2000:]
    died = subprocess.run(
        [sys.executable, "-m", "tests.scripts.publish_then_die"],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        timeout=60,
    )
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]
    notification = Notification.objects.get(event_id="crash-2")
    assert Outbox.objects.get(notification=notification).published_at is None

    outbox_relay.start()  # publishes the row a second time
    wait_for(
        lambda: Outbox.objects.get(notification=notification).published_at is not None,
        what="the row published again",
    )
    wait_for(lambda: smtp.received, what="the email")
    wait_for(
        lambda: Delivery.objects.filter(notification=notification, status="delivered").exists(),
        what="the email delivery recorded",
    )
    pipeline_worker_settles = 1.0  # time for a duplicate route message to be worked off
    time.sleep(pipeline_worker_settles)
    assert len(smtp.received) == 1
    assert Delivery.objects.filter(notification=notification).count() == 1


ACCEPT_ONE = """
import os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()
from notify.models import Category, Producer
from notify.services import notification_accept
notification_accept(
    producer=Producer.objects.get(name="shop"), event_id="crash-2", user_id="k2",
    category=Category.objects.get(key="order.shipped"),
    payload={"order_number": "K-10", "delivery_date": "2026-12-03", "items_count": 1},
    channels=["email"], ttl_seconds=None,
)
"""


def delivered(delivery: Delivery) -> bool:
    delivery.refresh_from_db()
    return delivery.status == DeliveryStatus.DELIVERED


@contextmanager
def consumer_paused(worker, queue: str):
    """The worker stops taking `queue` for a while: messages pile up where we can lose them."""
    app.control.cancel_consumer(queue, destination=[worker.node], reply=True, timeout=5)

    def nobody_consumes() -> bool:
        with app.connection_for_read() as conn:
            return conn.default_channel.queue_declare(queue=queue, passive=True)[2] == 0

    wait_for(nobody_consumes, timeout=10, what=f"the worker to stop consuming {queue}")
    try:
        yield
    finally:
        worker.restore(("high", "medium", "low"))


def routed_email_delivery(api, user_id: str) -> Delivery:
    """Accept and route an order event here, leaving its send message in `medium`."""
    api.put(
        f"/v1/users/{user_id}", {"email": f"{user_id}@example.com", "locale": "en"}, format="json"
    )
    notification_id = api.post(
        "/v1/notifications",
        {
            "event_id": f"lost-{user_id}",
            "user_id": user_id,
            "category": "order.shipped",
            "payload": {"order_number": "L-1", "delivery_date": "2026-12-03", "items_count": 1},
            "channels": ["email"],
        },
        format="json",
    ).json()["notification_id"]
    # The suite's relay, when it runs, publishes the route message: wait until it has
    # (the mark commits after the broker's confirm), so the caller's purge loses it.
    # Published after the purge, it reached the worker once consuming again and started
    # the email itself, leaving the sweeper nothing to find. In a test's own transaction
    # (the `db` fixture) the relay never sees the row: there is nothing to wait for.
    if session_relay_running() and not connection.in_atomic_block:
        wait_for(
            lambda: Outbox.objects.filter(
                notification_id=notification_id, published_at__isnull=False
            ).exists(),
            what="the relay to publish the route message",
        )
    notification_route(notification_id=notification_id)
    return Delivery.objects.get(notification_id=notification_id, channel="email")


def test_a_delivery_whose_message_was_lost_is_sent_by_the_sweeper(api, pipeline, celery_worker):
    smtp = pipeline
    with consumer_paused(celery_worker, "medium"):
        delivery = routed_email_delivery(api, "s1")
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge("medium")  # the broker lost every message
        # Time passes: the row is overdue and its last publish is long ago.
        Delivery.objects.filter(pk=delivery.pk).update(
            next_attempt_at=timezone.now() - timedelta(minutes=30),
            enqueued_at=timezone.now() - timedelta(hours=1),
        )
    assert sweep_due_deliveries() == 1
    wait_for(lambda: smtp.received, what="the email the sweeper re-enqueued")
    wait_for(lambda: delivered(delivery), what="the outcome to be recorded")
    assert delivery.attempts == 1
    assert sweep_due_deliveries() == 0  # nothing left for it


def test_a_stale_claim_is_recovered_and_sent(api, pipeline, celery_worker):
    smtp = pipeline
    with consumer_paused(celery_worker, "medium"):
        delivery = routed_email_delivery(api, "s2")
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge("medium")
        # A worker claimed it long ago and vanished (kill -9 mid-send).
        Delivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.SENDING,
            claimed_at=timezone.now() - timedelta(hours=1),
            attempts=1,
        )
    sweep_due_deliveries()  # gives the claim back
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.RETRYING
    assert "worker was lost" in delivery.last_error
    sweep_due_deliveries(now=timezone.now() + timedelta(seconds=5))  # and republishes it
    wait_for(lambda: smtp.received, what="the recovered email")
    wait_for(lambda: delivered(delivery), what="the outcome to be recorded")
    assert delivery.attempts == 2


def test_a_message_the_worker_rejects_ends_in_dead_letter(pipeline, broker):
    # A send for a delivery that does not exist cannot succeed: it must not vanish.
    app.send_task(
        "deliveries.send", args=[987654321], queue="medium", exchange="notify", routing_key="medium"
    )

    def dead_lettered():
        message = Queue("dead_letter", no_declare=True)(broker.default_channel).get(no_ack=True)
        return message is not None and message.decode()[0] == [987654321]

    assert wait_for(dead_lettered, what="the rejected message in dead_letter")
