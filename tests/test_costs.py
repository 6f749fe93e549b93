"""What one event costs the platform, in counts that do not depend on the machine:
SQL statements, database connections opened, SMTP sessions opened."""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import connection

from deliveries.models import Delivery
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Producer, Recipient
from notify.services import notification_accept
from tests.statuses import settled
from tests.test_pipeline_e2e import post_event, register
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
