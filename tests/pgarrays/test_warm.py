"""A new pooled connection plans the hot statements before it serves, so a worker's
first login codes and first burst do not wait on PostgreSQL's planner."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import connection

from deliveries.models import Delivery
from deliveries.pipeline.attempt import delivery_attempt
from deliveries.pipeline.routing import notification_route
from notify.models import Category, Producer, Recipient
from notify.services import notification_accept
from pgarrays.backend.base import DatabaseWrapper
from pgarrays.warm import _statements, statements_warm, warm_params

pytestmark = pytest.mark.django_db

PREPARED_SQL = """
    SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
     WHERE from_sql IS FALSE
"""


def prepared(raw: psycopg.Connection) -> list[tuple[str, int, int]]:
    return raw.execute(PREPARED_SQL).fetchall()


def test_an_array_is_warmed_empty_and_a_scalar_needs_its_sample():
    sql = "SELECT (SELECT %(ids)s::bigint[])::bigint[], %(now)s"
    assert warm_params(sql, {"now": 1}) == {"ids": "{}", "now": 1}
    with pytest.raises(ValueError, match="now"):
        warm_params(sql, {})


def test_a_connection_the_pool_opens_has_every_hot_statement_planned_generic():
    """What Django's pool calls on each connection it opens (in autocommit, as the pool
    opens them): every registered statement ends prepared with a generic plan."""
    params = {**connection.get_connection_params(), "autocommit": True}
    with psycopg.connect(**params) as raw:
        DatabaseWrapper(connection.settings_dict)._configure_connection(raw)
        rows = prepared(raw)
    assert len(_statements) >= 9  # the route's, the sender's, the feed's, the gate's, …
    assert len(rows) == len(_statements)
    assert all(generic >= 1 and custom <= 5 for _, generic, custom in rows), rows


def test_an_event_routed_and_sent_after_a_warm_up_prepares_none_of_them_again(
    demo_data, smtp, settings
):
    """psycopg keys a prepared statement by its text and its parameters' types: a warm-up
    binding another type than the real caller would leave the real run to prepare (and
    plan) its own. Prepared from their first run here, the real ones would show up as
    a second prepared statement of the same text."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
    Recipient.objects.create(user_id="warm-1", email="warm@example.com", locale="en")
    connection.ensure_connection()
    raw = connection.connection
    raw.prepare_threshold = 0
    statements_warm(raw)
    warmed = {statement: (generic, custom) for statement, generic, custom in prepared(raw)}
    notification_id = notification_accept(
        producer=Producer.objects.get_or_create(name="warm")[0],
        event_id=str(uuid.uuid4()),
        user_id="warm-1",
        category=Category.objects.get(key="order.shipped"),
        payload={"order_number": "W-1", "delivery_date": "2026-12-05", "items_count": 1},
        channels=["inapp", "email"],
        ttl_seconds=None,
    ).notification_id
    notification_route(notification_id=notification_id)
    email = Delivery.objects.get(notification_id=notification_id, channel="email")
    delivery_attempt(delivery_id=email.pk)
    assert Delivery.objects.get(pk=email.pk).status == "delivered"
    rows = prepared(raw)
    texts = [statement for statement, _, _ in rows]
    assert len(texts) == len(set(texts)), "a warmed statement was prepared again"
    after = {statement: (generic, custom) for statement, generic, custom in rows}
    used = [text for text, plans in warmed.items() if after.get(text) != plans]
    # The route's lock and write, the sender's load, claim and record, the feed's insert:
    # each ran on its generic plan, none planned afresh.
    assert len(used) >= 6, used
    for text in used:
        (generic, custom), (generic_after, custom_after) = warmed[text], after[text]
        assert generic_after > generic and custom_after == custom, text
