"""A worker plans its hot statements on its connections before its first message, so
its first events find them planned."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from deliveries.models import Delivery
from deliveries.pipeline.claim import deliveries_claim, delivery_load
from deliveries.pipeline.routing import notification_route
from deliveries.pipeline.warm import WARM_RUNS, empty_batch, hot_statements, statements_warm
from notify.models import Category, Notification, Producer, Recipient
from notify.services import notification_accept
from tests.processes import WorkerProcess

PAYLOAD = {"order_number": "W-1", "delivery_date": "2026-12-03", "items_count": 1}
_NAMED = re.compile(r"%\((\w+)\)s")


def as_sent(sql: str) -> str:
    """The text psycopg sends for `sql`: each name becomes $n in order of first use."""
    numbers: dict[str, int] = {}

    def number(match: re.Match) -> str:
        return f"${numbers.setdefault(match[1], len(numbers) + 1)}"

    return _NAMED.sub(number, sql).replace("%%", "%")


def plans(sql: str) -> tuple[int, int] | None:
    """(generic, custom) plans this connection's prepared `sql` has had; None when the
    connection has not prepared it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
            [as_sent(sql)],
        )
        return cursor.fetchone()


def accepted(user_id: str) -> Notification:
    Recipient.objects.get_or_create(user_id=user_id, defaults={"email": f"{user_id}@example.com"})
    result = notification_accept(
        producer=Producer.objects.get_or_create(name="warm")[0],
        event_id=str(uuid.uuid4()),
        user_id=user_id,
        category=Category.objects.get(key="order.shipped"),
        payload=PAYLOAD,
        channels=["inapp", "email"],
        ttl_seconds=None,
    )
    return Notification.objects.get(pk=result.notification_id)


@pytest.mark.parametrize("analytics", [False, True], ids=["analytics-off", "analytics-on"])
def test_a_warmed_connection_routes_and_sends_without_planning_a_hot_statement(
    demo_data, settings, analytics
):
    settings.NOTIFY_ANALYTICS_ENABLED = analytics  # the record then carries its events
    statements_warm()
    for sql in hot_statements():  # each on its generic plan, after its five own
        assert plans(sql) == (1, WARM_RUNS - 1), sql[:80]

    notification = accepted("warm-1")
    notification_route(notification_id=notification.pk)  # the in-app one sent too
    email = Delivery.objects.get(notification=notification, channel="email")
    assert deliveries_claim(loaded=[delivery_load(delivery_id=email.pk)], now=timezone.now())

    after = {sql: plans(sql) for sql in hot_statements()}
    assert all(custom == WARM_RUNS - 1 for _, custom in after.values()), after
    # The lock, the write, the in-app claim and its record, the email's load and claim
    # each ran on the plan warmed for it: the texts and types were the same.
    assert sum(generic - 1 for generic, _ in after.values()) >= 6, after
    record = hot_statements()[-1]  # with the events riding when analytics is on
    assert after[record][0] > 1, after


def test_a_statement_with_a_parameter_it_cannot_empty_is_refused():
    with pytest.raises(ValueError, match="cap"):
        empty_batch("SELECT %(cap)s::int", now=None)


def test_a_worker_warms_its_senders_connections_before_it_takes_a_message(worker_env):
    worker = WorkerProcess(
        {**worker_env, "DATABASE_WARM_CONNECTIONS": "1", "WORKER_CONCURRENCY": "3"},
        name=f"warm-{uuid.uuid4().hex[:6]}",
        queues="medium",
        pool="threads",
        concurrency=3,
    )
    start = worker.log_path.stat().st_size if worker.log_path.exists() else 0
    worker.start()
    try:
        log = worker.log_path.read_text()[start:]
    finally:
        worker.stop()
    warmed = log.find("warmed 3 PostgreSQL connections")
    assert warmed >= 0, log[-2000:]
    assert warmed < log.find(" ready."), log[-2000:]
