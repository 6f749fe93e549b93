"""History is partitioned by month: rows land in their notification's month, months ahead
exist, a row no month holds yet is kept (default partition) and moved into its month by
the maintenance, and the ORM, the API and idempotency work across months."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt
from history.partitions import (
    HISTORY_TABLES,
    default_partition_rows,
    month_add,
    month_of,
    month_partitions,
    partition_name,
    partitions_ensure,
)
from notify.models import Category, FeedEntry, Notification, Producer, Recipient
from notify.services import Event, notifications_accept

pytestmark = pytest.mark.django_db


def _partition_of(table: str, **where: object) -> str:
    column, value = next(iter(where.items()))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE {column} = %s", [value])
        return cursor.fetchone()[0]


@pytest.fixture
def shop():
    producer = Producer.objects.create(name="shop")
    category = Category.objects.create(key="order.shipped", queue="medium")
    recipient = Recipient.objects.create(user_id="ann", email="ann@example.com")
    return producer, category, recipient


def _history(producer, category, recipient, event_id: str) -> Notification:
    notification = Notification.objects.create(
        producer=producer,
        event_id=event_id,
        recipient=recipient,
        category=category,
        fingerprint="f",
    )
    delivery = Delivery.objects.create(
        notification=notification, channel="email", target=recipient.email, queue="medium"
    )
    DeliveryAttempt.objects.create(
        delivery=delivery, number=1, started_at=timezone.now(), duration_ms=5, outcome="delivered"
    )
    FeedEntry.objects.create(
        notification=notification, recipient=recipient, category=category.key, title="Shipped"
    )
    return notification


def test_every_history_table_has_this_month_and_the_months_ahead(settings):
    current = month_of(timezone.now())
    for t in HISTORY_TABLES:
        months = month_partitions(t.table)
        for n in range(settings.NOTIFY_PARTITIONS_AHEAD + 1):
            assert month_add(current, n) in months, (t.table, n)


def test_rows_of_one_notification_share_its_month(shop):
    notification = _history(*shop, "e1")
    month = month_of(notification.created_at)
    delivery = notification.deliveries.get()
    assert delivery.accepted_at == notification.created_at
    assert delivery.attempt_log.get().accepted_at == notification.created_at
    for t, column, value in [
        ("notify_notification", "id", notification.pk),
        ("notify_feedentry", "notification_id", notification.pk),
        ("deliveries_delivery", "id", delivery.pk),
        ("deliveries_deliveryattempt", "delivery_id", delivery.pk),
    ]:
        assert _partition_of(t, **{column: value}) == partition_name(t, month)


def test_an_event_id_is_accepted_once_whatever_the_month(shop):
    producer, category, recipient = shop
    first = notifications_accept(
        producer=producer,
        events=[Event(event_id="o-1", user_id="ann", category=category, payload={})],
    )[0]
    # The stored notification moves to an older month: its key still answers for it.
    old = timezone.now() - timedelta(days=40)
    Notification.objects.filter(pk=first.notification_id).update(created_at=old)
    again = notifications_accept(
        producer=producer,
        events=[Event(event_id="o-1", user_id="ann", category=category, payload={})],
    )[0]
    assert (again.notification_id, again.created) == (first.notification_id, False)
    assert Notification.objects.filter(event_id="o-1").count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():
        Notification.objects.create(
            producer=producer,
            event_id="o-1",
            recipient=recipient,
            category=category,
            fingerprint="f",
        )


def test_a_row_no_month_holds_is_kept_and_moved_into_its_month(shop):
    producer, category, recipient = shop
    notification = _history(producer, category, recipient, "far")
    # Far back (a clock gone wrong, an import): no partition for that month exists yet.
    far = datetime(2019, 5, 17, 12, tzinfo=UTC)
    Notification.objects.filter(pk=notification.pk).update(created_at=far)
    Delivery.objects.filter(notification=notification).update(accepted_at=far)
    assert _partition_of("notify_notification", id=notification.pk) == (
        "notify_notification_default"
    )
    assert default_partition_rows()["notify_notification"] == 1

    created = partitions_ensure()
    assert "notify_notification_p2019_05" in created
    assert "deliveries_delivery_p2019_05" in created
    assert _partition_of("notify_notification", id=notification.pk) == (
        "notify_notification_p2019_05"
    )
    assert default_partition_rows()["notify_notification"] == 0
    assert Notification.objects.get(pk=notification.pk).deliveries.get().accepted_at == far
    assert partitions_ensure() == []  # idempotent


def test_the_conversion_keeps_rows_names_and_the_identity_sequence():
    """The migration's rebuild on a table of its own: rows, constraint and index names,
    and ids that go on after the copied ones."""
    migration = importlib.import_module("history.migrations.0002_partition_history")
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE scratch_parent (id bigint PRIMARY KEY);"
            "INSERT INTO scratch_parent VALUES (1);"
            "CREATE TABLE scratch (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
            " parent_id bigint NOT NULL REFERENCES scratch_parent (id),"
            " n integer NOT NULL CONSTRAINT scratch_n_check CHECK (n >= 0),"
            " at timestamptz NOT NULL, CONSTRAINT scratch_uniq UNIQUE (parent_id, n, at));"
            "CREATE INDEX scratch_n ON scratch (n) WHERE n > 0;"
            "INSERT INTO scratch (parent_id, n, at) "
            " SELECT 1, g, now() - g * interval '32 days' FROM generate_series(0, 3) g;"
        )
        migration._partition(cursor, "scratch", "at")
        cursor.execute("SELECT count(*), count(DISTINCT tableoid) FROM scratch")
        assert cursor.fetchone() == (4, 4)
        cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'scratch'::regclass")
        assert {row[0] for row in cursor.fetchall()} >= {
            "scratch_pkey",
            "scratch_uniq",
            "scratch_n_check",
        }
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'scratch'")
        assert "scratch_n" in {row[0] for row in cursor.fetchall()}
        cursor.execute("INSERT INTO scratch (parent_id, n, at) VALUES (1, 9, now()) RETURNING id")
        assert cursor.fetchone()[0] == 5
        with pytest.raises(Exception, match="scratch_n_check"), transaction.atomic():
            cursor.execute("INSERT INTO scratch (parent_id, n, at) VALUES (1, -1, now())")
