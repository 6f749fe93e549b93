"""SMS fixtures: a real SMSC peer on loopback and this process's SMPP session bound to it."""

from __future__ import annotations

import os
import uuid

import pytest
from django.conf import settings as django_settings
from django.db import transaction

from scripts.ports import unused_port
from tests.deliveries.sms.smsc import Smsc

SYSTEM_ID, PASSWORD = "notify-test", "s3cret"


# The SMSC peer's port is chosen now, at collection, so the Celery worker the suite
# starts later inherits it: a worker binds to this peer like a real one to its SMSC.
# (Only where the SMSC is; SMS stays off in the worker's gate, so no other test's
# notification grows an SMS delivery.)
SMSC_PORT = unused_port()
# SMPP_HOST in the environment turns SMS on; the worker keeps the channels this process
# has (SMS off), so only a test that enables SMS itself routes a notification to it.
os.environ.setdefault("NOTIFY_CHANNELS_ENABLED", ",".join(django_settings.NOTIFY_CHANNELS_ENABLED))
os.environ.update(
    {
        "SMPP_HOST": "127.0.0.1",
        "SMPP_PORT": str(SMSC_PORT),
        "SMPP_SYSTEM_ID": SYSTEM_ID,
        "SMPP_PASSWORD": PASSWORD,
        "SMPP_ENQUIRE_LINK_INTERVAL": "1",
        "SMPP_DLR_MATCH_DELAY": "0.1",
    }
)


@pytest.fixture(scope="session")
def smsc_peer():
    peer = Smsc(system_id=SYSTEM_ID, password=PASSWORD, port=SMSC_PORT)
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture
def smsc(smsc_peer):
    smsc_peer.reset()
    yield smsc_peer
    smsc_peer.reset()


@pytest.fixture
def sms_settings(settings, smsc):
    """SMPP settings pointing at the peer, with short keep-alive and backoff for tests."""
    from deliveries.channels.sms.smpp.process import session_close

    settings.SMPP_HOST = "127.0.0.1"
    settings.SMPP_PORT = smsc.port
    settings.SMPP_SYSTEM_ID = SYSTEM_ID
    settings.SMPP_PASSWORD = PASSWORD
    settings.SMPP_SOURCE_ADDR = "Notify"
    # 1 s instead of 30-60 s, so "survives idle" is seen over seconds, not minutes.
    settings.SMPP_ENQUIRE_LINK_INTERVAL = 1.0
    settings.SMPP_RESPONSE_TIMEOUT = 2.0
    settings.SMPP_BIND_WAIT = 3.0
    settings.SMPP_RECONNECT_BASE = 0.05
    settings.SMPP_RECONNECT_MAX = 0.5
    settings.SMPP_TPS = 100.0
    settings.SMPP_DLR_MATCH_DELAY = 0.1
    settings.NOTIFY_CHANNELS_ENABLED = [*settings.NOTIFY_CHANNELS_ENABLED, "sms"]
    session_close()  # a session made with other settings is not reused
    yield settings
    session_close()


@pytest.fixture
def sms_session(sms_settings):
    """This process's session (the one the channel uses), bound to the peer."""
    from deliveries.channels.sms.smpp.process import session_close, session_for_process

    session = session_for_process()
    assert session.wait_bound(5), "the SMPP session did not bind to the test SMSC"
    yield session
    session_close()


@pytest.fixture
def login_code(transactional_db, sms_session):
    """Make a `security.login_code` notification for the demo user who has a phone."""
    yield _login_code_factory()
    _close_open_deliveries()


@pytest.fixture
def login_code_for_worker(pipeline, sms_settings):
    """The same, for a test where the suite's Celery worker does the sending.

    Callable like `login_code`; `.make` is the same factory and `.smtp` the SMTP peer
    the worker delivers email to.
    """
    make = _login_code_factory()
    make.make = make
    make.smtp = pipeline
    yield make
    _close_open_deliveries()


def _close_open_deliveries():
    """A retry this test scheduled must not reach the worker during a later test."""
    from deliveries.models import CLAIMABLE_STATUSES, Delivery, DeliveryStatus

    Delivery.objects.filter(status__in=CLAIMABLE_STATUSES).update(status=DeliveryStatus.DEAD)


def _login_code_factory():
    from deliveries.support.demo import seed_demo
    from notify.models import Category, Notification, Producer, Recipient

    seed_demo()
    producer, _ = Producer.objects.get_or_create(name="sms-tests")

    def make(code: str = "424242", *, user_id: str = "demo-user-ru") -> Notification:
        return Notification.objects.create(
            producer=producer,
            event_id=str(uuid.uuid4()),
            recipient=Recipient.objects.get(user_id=user_id),
            category=Category.objects.get(key="security.login_code"),
            payload={"code": code},
            channels=["sms"],
            fingerprint="sms-tests",
        )

    return make


def route_and_send(notification, *, hold: float = 0.0):
    """Route through the gate and run the SMS attempt in this process.

    One transaction around both: the send message the route publishes goes out only at
    commit, when the attempt is already recorded, so a worker that may be running for
    other tests finds nothing left to claim. `hold` keeps the transaction open after the
    send, so a receipt arrives before the send is visible.
    """
    import time
    from datetime import timedelta

    from django.utils import timezone

    from deliveries.models import Delivery, DeliveryStatus
    from deliveries.pipeline.attempt import delivery_attempt
    from deliveries.pipeline.routing import deliveries_fallback, notification_route

    with transaction.atomic():
        notification_route(notification_id=str(notification.pk))
        delivery = Delivery.objects.get(notification=notification, channel="sms")
        # As the send task runs it: the attempt, then the fallback of a dead delivery.
        deliveries_fallback(reports=[delivery_attempt(delivery_id=delivery.pk)])
        # A retry it scheduled is parked a day out, so a running worker never sends it to
        # the SMSC peer while a later test counts what the peer received.
        Delivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.RETRYING).update(
            next_attempt_at=timezone.now() + timedelta(days=1)
        )
        time.sleep(hold)
    delivery.refresh_from_db()
    return delivery
