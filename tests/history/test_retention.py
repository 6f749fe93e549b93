"""Retention: a month past NOTIFY_RETENTION_DAYS ends up in Parquet files whose rows match
the database, its partitions are dropped, and newer months stay; a month whose archive
cannot be written stays in the database and is recorded as failed."""

from __future__ import annotations

import json
import logging
from io import StringIO

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.db import connection

from deliveries.models import Delivery, DeliveryAttempt, DeliveryRedrive, DigestItem, DigestWindow
from deliveries.ops.metrics import metrics_render
from history.models import ArchivedMonth, MonthState
from history.partitions import (
    HISTORY_TABLES,
    history_months,
    month_partition_create,
    partition_name,
)
from history.retention import retention_run, retention_status
from history.tasks import retention_run_task
from notify.models import EventKey, FeedEntry, Notification, Outbox
from tests.history.conftest import months_back
from tests.history.factories import month_day, notifications_in, partition_rows, person

TABLES = [t.table for t in HISTORY_TABLES]


def rows_of(table: str, ids: list, column: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s)", [ids])
        return cursor.fetchone()[0]


def test_the_oldest_month_is_in_parquet_with_its_counts_and_gone_from_the_database(
    db, archive, clock
):
    ada, bob = person("ada"), person("bob")
    oldest, recent = months_back(clock, 4), [months_back(clock, n) for n in (3, 1, 0)]
    old = notifications_in(ada, oldest, count=3) + notifications_in(bob, oldest, count=1)
    for month in recent:
        notifications_in(ada, month)
    before = {m: {t: partition_rows(t, m) for t in TABLES} for m in recent}
    assert status_now(clock).months_pending == 1

    report = retention_run(now=clock)

    key = f"{oldest:%Y-%m}"
    assert report.archived == {
        key: {
            "notify_notification": 4,
            "notify_feedentry": 4,
            "deliveries_delivery": 8,
            "deliveries_deliveryattempt": 8,
        }
    }
    assert report.failed == {}
    record = ArchivedMonth.objects.get(month=oldest)
    assert record.state == MonthState.ARCHIVED
    for table in TABLES:
        path = archive / table / f"{key}.parquet"
        entry = record.files[table]
        assert entry["url"] == str(path)
        assert pq.read_metadata(path).num_rows == entry["rows"]
        assert partition_rows(table, oldest) is None
    notifications = pq.read_table(archive / "notify_notification" / f"{key}.parquet")
    assert sorted(notifications.column("id").to_pylist()) == sorted(str(n.pk) for n in old)
    assert notifications.schema.field("created_at").type.tz == "UTC"
    assert {str(n.pk): n.payload for n in old} == {
        row["id"]: json.loads(row["payload"]) for row in notifications.to_pylist()
    }
    # The rows other tables hung on the month's notifications and deliveries went too.
    old_ids = [n.pk for n in old]
    assert not EventKey.objects.filter(notification_id__in=old_ids).exists()
    assert not Outbox.objects.filter(notification_id__in=old_ids).exists()
    assert not DeliveryRedrive.objects.filter(delivery__notification_id__in=old_ids).exists()
    assert DeliveryRedrive.objects.count() == 6
    # Newer months are as they were.
    assert oldest not in history_months()
    assert {m: {t: partition_rows(t, m) for t in TABLES} for m in recent} == before
    assert Notification.objects.count() == 6 and FeedEntry.objects.count() == 6
    assert Delivery.objects.count() == 12 and DeliveryAttempt.objects.count() == 12
    assert status_now(clock).months_pending == 0

    # A second run finds nothing to do.
    again = retention_run(now=clock)
    assert (again.archived, again.failed) == ({}, {})


def _digest_of(deliveries: list[Delivery], *, closed_at, state: str = "sent") -> DigestWindow:
    """A digest window holding these deliveries (as the route files them)."""
    first = deliveries[0]
    window = DigestWindow.objects.create(
        recipient_id=first.recipient_id,
        category=first.notification.category,
        channel=first.channel,
        state=state,
        opened_at=closed_at,
        closes_at=closed_at,
        closed_at=closed_at if state != "open" else None,
        items_count=len(deliveries),
    )
    for delivery in deliveries:
        DigestItem.objects.create(
            window=window,
            delivery_id=delivery.pk,
            notification_id=delivery.notification_id,
            accepted_at=delivery.accepted_at,
            occurred_at=delivery.accepted_at,
        )
    return window


def test_digest_windows_and_items_go_with_the_month_of_their_deliveries(db, archive, clock):
    ada = person("ada")
    oldest, recent = months_back(clock, 4), months_back(clock, 1)
    notifications_in(ada, oldest, count=3)
    notifications_in(ada, recent, count=2)
    emails = {
        month: list(Delivery.objects.filter(channel="email", accepted_at=month_day(month)))
        for month in (oldest, recent)
    }
    old_digest = _digest_of(emails[oldest][:2], closed_at=month_day(oldest))
    empty_dropped = DigestWindow.objects.create(
        recipient=ada,
        category=old_digest.category,
        channel="email",
        state="dropped",
        opened_at=month_day(oldest),
        closes_at=month_day(oldest),
        closed_at=month_day(oldest),
    )
    across = _digest_of([emails[oldest][2], emails[recent][0]], closed_at=month_day(recent))
    kept = _digest_of(emails[recent][1:], closed_at=month_day(recent), state="open")

    report = retention_run(now=clock)

    assert list(report.archived) == [f"{oldest:%Y-%m}"]
    assert not DigestWindow.objects.filter(pk__in=[old_digest.pk, empty_dropped.pk]).exists()
    # A window with an item in a later month stays, holding only that item.
    assert sorted(DigestWindow.objects.values_list("pk", flat=True)) == [across.pk, kept.pk]
    assert sorted(DigestItem.objects.values_list("window_id", "delivery_id")) == [
        (across.pk, emails[recent][0].pk),
        (kept.pk, emails[recent][1].pk),
    ]


def test_an_empty_month_is_dropped_and_recorded_with_empty_files(db, archive, clock):
    empty = months_back(clock, 5)
    for t in HISTORY_TABLES:
        month_partition_create(t, empty)

    report = retention_run(now=clock)

    assert report.archived == {f"{empty:%Y-%m}": dict.fromkeys(TABLES, 0)}
    record = ArchivedMonth.objects.get(month=empty)
    assert {entry["rows"] for entry in record.files.values()} == {0}
    assert pq.read_table(archive / "notify_notification" / f"{empty:%Y-%m}.parquet").num_rows == 0
    assert empty not in history_months()


def test_an_archive_that_cannot_be_written_leaves_the_month_in_place_and_records_failed(
    db, settings, tmp_path, clock, caplog
):
    blocker = tmp_path / "archive-is-a-file"
    blocker.write_text("not a directory")
    settings.NOTIFY_ARCHIVE_URL = str(blocker)
    oldest = months_back(clock, 4)
    notifications_in(person("cy"), oldest, count=2)

    with caplog.at_level(logging.ERROR, logger="history.retention"):
        report = retention_run(now=clock)

    assert list(report.failed) == [f"{oldest:%Y-%m}"]
    record = ArchivedMonth.objects.get(month=oldest)
    assert record.state == MonthState.FAILED and record.error
    assert record.archived_at is None
    assert {t: partition_rows(t, oldest) for t in TABLES} == {
        "notify_notification": 2,
        "notify_feedentry": 2,
        "deliveries_delivery": 4,
        "deliveries_deliveryattempt": 4,
    }
    assert EventKey.objects.count() == 2 and Outbox.objects.count() == 2
    assert any(
        r.levelno == logging.ERROR and oldest.strftime("%Y-%m") in r.getMessage()
        for r in caplog.records
    )
    status = status_now(clock)
    assert (status.months_failed, status.months_pending) == (1, 1)
    # What an operator's alert sees.
    scrape = metrics_render().decode()
    assert 'notify_history_months{state="failed"} 1.0' in scrape
    assert 'notify_metrics_source_up{source="history"} 1.0' in scrape

    # Once the archive can be written, the next run archives it.
    settings.NOTIFY_ARCHIVE_URL = str(tmp_path / "archive")
    assert list(retention_run(now=clock).archived) == [f"{oldest:%Y-%m}"]
    assert ArchivedMonth.objects.get(month=oldest).state == MonthState.ARCHIVED
    assert status_now(clock).months_failed == 0


def test_rows_stranded_in_the_default_partition_are_archived_with_their_month(db, archive, clock):
    oldest = months_back(clock, 6)
    [stray] = notifications_in(person("dee"), months_back(clock, 0), count=1)
    with connection.cursor() as cursor:
        # A month nobody made a partition for: the rows land in the default partitions.
        at = clock.replace(year=oldest.year, month=oldest.month, day=3)
        cursor.execute(
            "UPDATE notify_notification SET created_at = %s WHERE id = %s", [at, stray.pk]
        )
        for table in ("notify_feedentry", "deliveries_delivery"):
            cursor.execute(
                f"UPDATE {table} SET accepted_at = %s WHERE notification_id = %s", [at, stray.pk]
            )
        cursor.execute(
            "UPDATE deliveries_deliveryattempt SET accepted_at = %s WHERE delivery_id IN "
            "(SELECT id FROM deliveries_delivery WHERE notification_id = %s)",
            [at, stray.pk],
        )
    assert status_now(clock).default_partition_rows == 6

    report = retention_run(now=clock)

    assert report.archived[f"{oldest:%Y-%m}"]["notify_notification"] == 1
    assert status_now(clock).default_partition_rows == 0
    assert not Notification.objects.filter(pk=stray.pk).exists()


def status_now(now):
    return retention_status(now=now)


@pytest.fixture
def committed(transactional_db, archive, clock):
    """Retention with real commits (a transactional test): the month's partitions, DDL
    that a flush does not undo, are dropped afterwards if the test left any."""
    month = months_back(clock, 5)
    yield month
    with connection.cursor() as cursor:
        for t in HISTORY_TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {partition_name(t.table, month)}")


def test_the_command_and_the_task_run_retention_with_real_commits(committed, archive):
    month = committed
    notifications_in(person("eve"), month, count=2)
    out = StringIO()

    call_command("history_retention", stdout=out)

    assert f"{month:%Y-%m}: archived and dropped (notify_notification 2" in out.getvalue()
    assert partition_rows("notify_notification", month) is None
    assert pq.read_table(archive / "deliveries_delivery" / f"{month:%Y-%m}.parquet").num_rows == 4
    status = StringIO()
    call_command("history_retention", "--status", stdout=status)
    assert "months_pending: 0" in status.getvalue()
    # The beat task runs the same service; here nothing is left to do.
    assert retention_run_task.apply().get()["archived"] == {}
