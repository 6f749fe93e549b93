"""What one event costs the platform, in counts that do not depend on the machine:
SQL statements, database connections opened, SMTP sessions opened; and what a batch of
pushes costs: statements and broker messages."""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import connection
from django.test import TestCase

from deliveries.models import Delivery
from deliveries.pipeline.attempt import deliveries_attempt, delivery_attempt
from deliveries.pipeline.routing import notification_route, notifications_route
from notify.models import Category, Producer, Recipient
from notify.services import notification_accept
from tests.conftest import purge_queues
from tests.deliveries.pipeline.test_pipeline_e2e import post_event, register
from tests.statuses import settled
from tests.waiting import wait_for

ORDER = {"order_number": "C-1", "delivery_date": "2026-12-03", "items_count": 1}
MAX_STATEMENTS_PER_EVENT = 15


class StatementLog:
    """Every statement this connection sends, except savepoints: a test runs inside a
    transaction, so its atomic blocks become savepoints that production does not send
    (there they are BEGIN/COMMIT, which Django does not log as statements either)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if not sql.lstrip().upper().startswith(("SAVEPOINT", "RELEASE SAVEPOINT")):
            self.statements.append(sql)
        return execute(sql, params, many, context)


def accept(user_id: str) -> str:
    return str(
        notification_accept(
            producer=Producer.objects.get_or_create(name="costs")[0],
            event_id=str(uuid.uuid4()),
            user_id=user_id,
            category=Category.objects.get(key="order.shipped"),
            payload=ORDER,
            channels=None,  # the category's defaults: in-app, email, Web Push, FCM
            ttl_seconds=None,
        ).notification_id
    )


def test_an_order_shipped_event_costs_at_most_15_statements_and_one_smtp_session(
    demo_data, smtp, settings
):
    # The real SMTP backend (the test runner swaps in an in-memory one) and our peer.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    Recipient.objects.create(user_id="cost-1", email="cost@example.com", locale="en")
    for _ in range(2):  # the second event runs on warm caches
        notification_id = accept("cost-1")
        log = StatementLog()
        with connection.execute_wrapper(log):
            notification_route(notification_id=notification_id)
        email = Delivery.objects.get(notification_id=notification_id, channel="email")
        with connection.execute_wrapper(log):
            delivery_attempt(delivery_id=email.pk)
        by_channel = dict(
            Delivery.objects.filter(notification_id=notification_id).values_list(
                "channel", "status"
            )
        )
        assert by_channel == {
            "inapp": "delivered",
            "email": "delivered",
            "webpush": "suppressed",  # no device registered
            "fcm": "suppressed",  # not enabled here
        }
        assert len(log.statements) <= MAX_STATEMENTS_PER_EVENT, "\n".join(log.statements)
    assert len(smtp.received) == 2
    # Both emails went over one SMTP session: the sender keeps it open.
    assert smtp.handler.sessions == 1


@pytest.mark.e2e
def test_workers_open_no_database_connection_per_task_after_warm_up(api, pipeline, workers_with):
    """A burst after a warm-up burst opens no new PostgreSQL session anywhere: the
    production worker shape (threads) borrows from its process's pool."""
    workers_with(pool="threads", concurrency=8)
    register(api, "cost-2", email="cost2@example.com", locale="en")

    def burst(size: int) -> None:
        ids = [
            post_event(api, user_id="cost-2", channels=["inapp", "email"]).json()["notification_id"]
            for _ in range(size)
        ]
        for notification_id in ids:
            wait_for(settled(api, notification_id, {"inapp", "email"}), what="a burst event")

    burst(20)
    before = sessions_opened()
    burst(20)
    assert sessions_opened() - before == 0


def sessions_opened() -> int:
    """Sessions ever opened to the test database (PostgreSQL's own counter)."""
    time.sleep(1.5)  # backends flush their statistics at most once a second
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


# --- Push: what a batch of pushes costs, routed and sent -------------------------------------
PUSH_PEOPLE = 10  # one event each: a route batch's worth of different people


def push_batch_costs(channel: str, devices: dict[str, dict], broker) -> tuple[list[str], int]:
    """Accept one order.shipped event on `channel` per person in `devices` (user id ->
    Device fields), route them as one batch and send what routing published, as the
    channel's sender does. Returns the statements of both and the send messages
    published to the broker (really published: the route's after-commit callbacks run)."""
    from deliveries.models import Device
    from tests.deliveries.pipeline.test_send_at_route import send_messages

    ids = []
    for user_id, fields in devices.items():
        recipient = Recipient.objects.create(user_id=user_id, locale="en")
        Device.objects.create(recipient=recipient, **fields)
        ids.append(
            notification_accept(
                producer=Producer.objects.get_or_create(name="costs")[0],
                event_id=str(uuid.uuid4()),
                user_id=user_id,
                category=Category.objects.get(key="order.shipped"),
                payload=ORDER,
                channels=[channel],
                ttl_seconds=None,
            ).notification_id
        )
    log = StatementLog()
    with connection.execute_wrapper(log), TestCase.captureOnCommitCallbacks(execute=True):
        notifications_route(notification_ids=ids)
    messages = send_messages(broker, "medium")
    with connection.execute_wrapper(log):
        for delivery_ids in messages:
            deliveries_attempt(delivery_ids=delivery_ids)
    statuses = set(
        Delivery.objects.filter(notification_id__in=ids).values_list("channel", "status")
    )
    assert statuses == {(channel, "delivered")}
    return log.statements, len(messages)


def one_round(settings) -> None:
    """The sender's first round takes the whole batch: a round doubles only while the
    one before took under half of NOTIFY_BATCH_ROUND_SECONDS, so on a busy machine the
    number of rounds, and with it the statements, would vary."""
    settings.NOTIFY_BATCH_ROUND_START = PUSH_PEOPLE


@pytest.fixture
def push_peer(settings, monkeypatch):
    """A push service of this module's own (tests/deliveries/push/conftest.py's are for
    the tests beside it), on a free port that the allow-list names."""
    from tests.deliveries.push.peer import PushService

    monkeypatch.setenv("NOTIFY_TEST_PUSH_PORT", "0")
    service = PushService()
    service.start()
    settings.WEBPUSH_ALLOWED_ORIGINS = [service.origin]
    yield service
    service.stop()


@pytest.fixture
def fcm_peer(settings, tmp_path):
    """A local FCM, with firebase-admin in this process pointed at it."""
    from tests.deliveries.push.fcm_peer import FcmService

    service = FcmService(tmp_path)
    service.start()
    settings.FCM_CREDENTIALS = str(service.credentials_path)
    settings.FCM_SEND_URL = service.send_url
    settings.NOTIFY_CHANNELS_ENABLED = [*settings.NOTIFY_CHANNELS_ENABLED, "fcm"]
    yield service
    service.stop()


@pytest.fixture
def quiet_broker(broker, session_worker_paused):
    """The test vhost's queues empty, and no session worker taking what is published."""
    purge_queues(broker)
    yield broker
    purge_queues(broker)


# The statements of a batch of pushes, routed and sent in one round. The route: the lock
# (which reads the notifications), the people's devices, the gate's reads, one write of
# every delivery, and the webhook subscriptions it may have to tell; the sender: its load
# of the batch and the template versions. Whatever the batch's size.
PUSH_BATCH_STATEMENTS = 7
# Each round of the sender: one claim, the devices read once, one write of every outcome.
PUSH_ROUND_STATEMENTS = 3
# Web Push reads the round's endpoints to find each push-service breaker (push_hosts in
# deliveries/pipeline/pressure.py): one statement a round. FCM has one breaker: none.
WEBPUSH_ROUND_STATEMENTS = 1


def test_a_batch_of_web_pushes_costs_one_send_message_and_eleven_statements_whatever_its_size(
    demo_data, quiet_broker, push_peer, clean_breakers, settings
):
    one_round(settings)
    devices = {}
    for number in range(PUSH_PEOPLE):
        _, body = push_peer.subscribe(f"cost-wp-{number}")
        devices[f"cost-wp-{number}"] = {
            "kind": "webpush",
            "installation_id": f"cost-wp-{number}",
            "endpoint": body["endpoint"],
            "p256dh": body["keys"]["p256dh"],
            "auth": body["keys"]["auth"],
        }
    statements, send_messages = push_batch_costs("webpush", devices, quiet_broker)
    # Every browser got its push, decrypted as a browser would.
    assert sorted(r.subscriber for r in push_peer.received if r.status == 201) == sorted(devices)
    # One send message carries the batch: 0.1 broker messages per push (with the route
    # message the relay publishes for the batch, 0.2).
    assert send_messages == 1
    bound = PUSH_BATCH_STATEMENTS + PUSH_ROUND_STATEMENTS + WEBPUSH_ROUND_STATEMENTS
    assert len(statements) <= bound, "\n".join(statements)


def test_a_batch_of_fcm_pushes_costs_one_send_message_and_ten_statements_whatever_its_size(
    demo_data, quiet_broker, fcm_peer, clean_breakers
):
    devices = {
        f"cost-fcm-{number}": {
            "kind": "fcm",
            "token": f"cost-token-{number}",
            "platform": "android",
        }
        for number in range(PUSH_PEOPLE)
    }
    statements, send_messages = push_batch_costs("fcm", devices, quiet_broker)
    assert sorted(s["message"]["token"] for s in fcm_peer.sends) == sorted(
        d["token"] for d in devices.values()
    )
    assert send_messages == 1
    # FCM sends the batch in one call, so one round whatever the settings.
    assert len(statements) <= PUSH_BATCH_STATEMENTS + PUSH_ROUND_STATEMENTS, "\n".join(statements)
