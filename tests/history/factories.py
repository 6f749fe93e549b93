"""History rows dated in a chosen month: a person, and notifications with everything that
hangs on them (feed entry, email and SMS deliveries with an attempt each, outbox row,
event key, a re-drive record), moved to their month with SQL as time would have put
them there."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow.parquet as pq
from django.db import connection
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt, DeliveryRedrive
from history.partitions import HISTORY_TABLES, month_partition_create
from notify.models import Category, FeedEntry, Notification, Outbox, Producer, Recipient

_numbers = itertools.count(1)


def person(user_id: str, *, email: str = "", phone: str = "") -> Recipient:
    return Recipient.objects.create(
        user_id=user_id,
        email=email or f"{user_id}@example.org",
        phone=phone or f"+1555{next(_numbers):07d}",
    )


def month_day(month: date, day: int = 10) -> datetime:
    return datetime(month.year, month.month, day, 12, tzinfo=UTC)


def notifications_in(
    recipient: Recipient, month: date, *, count: int = 2, secret: str = ""
) -> list[Notification]:
    """`count` notifications of `recipient` accepted in `month`, each with a feed entry,
    two deliveries (email, SMS) with one attempt each, an outbox row and its event key;
    the first delivery has a re-drive record. `secret` (and the user id, as producers
    often send it) goes into the payload and titles, so a test can look for it afterwards."""
    producer, _ = Producer.objects.get_or_create(name="history-shop")
    category, _ = Category.objects.get_or_create(key="order.shipped")
    secret = secret or recipient.user_id
    made = []
    for _ in range(count):
        n = next(_numbers)
        notification = Notification.objects.create(
            producer=producer,
            event_id=f"evt-{n}",
            recipient=recipient,
            category=category,
            payload={
                "order": f"ORD-{secret}-{n}",
                "nested": {"note": secret, "account": recipient.user_id},
            },
            fingerprint=f"{n:064d}",
        )
        # Published long ago, as history is: a relay running beside the test (the suite's)
        # must not route it again while retention has the month locked.
        Outbox.objects.create(
            notification=notification, queue="medium", published_at=timezone.now()
        )
        FeedEntry.objects.create(
            recipient=recipient,
            notification=notification,
            category=category.key,
            title=f"Order ORD-{secret}-{n} shipped",
        )
        for channel, target in (("email", recipient.email), ("sms", recipient.phone)):
            delivery = Delivery.objects.create(
                notification=notification,
                channel=channel,
                target=target,
                queue="medium",
                status="delivered",
                recipient=recipient,
            )
            DeliveryAttempt.objects.create(
                delivery=delivery,
                number=1,
                started_at=timezone.now(),
                duration_ms=12,
                outcome="delivered",
                response=f"250 ok for {target}",
            )
        DeliveryRedrive.objects.create(
            delivery=notification.deliveries.first(), previous_status="dead", previous_attempts=1
        )
        made.append(notification)
    rows_move_to_month(month, [m.pk for m in made])
    return made


def rows_move_to_month(month: date, notification_ids: list) -> None:
    """Date the notifications (and their rows) on the 10th of `month`: the month's
    partitions are made first, then the rows move into them."""
    for t in HISTORY_TABLES:
        month_partition_create(t, month)
    at = month_day(month)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE notify_notification SET created_at = %s WHERE id = ANY(%s)",
            [at, notification_ids],
        )
        cursor.execute(
            "UPDATE notify_feedentry SET accepted_at = %s WHERE notification_id = ANY(%s)",
            [at, notification_ids],
        )
        cursor.execute(
            "UPDATE deliveries_deliveryattempt SET accepted_at = %s WHERE delivery_id IN "
            "(SELECT id FROM deliveries_delivery WHERE notification_id = ANY(%s))",
            [at, notification_ids],
        )
        cursor.execute(
            "UPDATE deliveries_delivery SET accepted_at = %s WHERE notification_id = ANY(%s)",
            [at, notification_ids],
        )


def partition_rows(table: str, month: date) -> int | None:
    """Rows in `table`'s partition of `month`, or None when it has none."""
    name = f"{table}_p{month:%Y_%m}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if not cursor.fetchone()[0]:
            return None
        cursor.execute(f"SELECT count(*) FROM {name}")
        return cursor.fetchone()[0]


def archived_text(archive: Path) -> tuple[bytes, str]:
    """Every archive file's raw bytes, and every value in them decoded, as text."""
    raw, values = b"", []
    for path in sorted(archive.rglob("*.parquet")):
        raw += path.read_bytes()
        values.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    return raw, "\n".join(values)
