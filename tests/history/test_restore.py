"""Restoring an archived month for support: all of it or one person's rows come back,
twice is the same as once, and retention drops the copy again after
NOTIFY_RESTORE_KEEP_DAYS without archiving it a second time."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from deliveries.counts import delivery_counts_fold
from deliveries.models import Delivery, DeliveryAttempt
from history.archive import ArchiveMismatch
from history.models import ArchivedMonth
from history.partitions import HISTORY_TABLES, history_months
from history.restore import month_restore
from history.retention import retention_run
from notify.counts import accepted_counts_fold
from notify.models import FeedEntry, Notification
from tests.history.conftest import months_back
from tests.history.factories import notifications_in, partition_rows, person

TABLES = [t.table for t in HISTORY_TABLES]


@pytest.fixture
def archived_month(db, archive, clock):
    """A month of two people's history (3 notifications of ada, 1 of bob), archived."""
    month = months_back(clock, 4)
    ada, bob = person("ada"), person("bob")
    notifications = {
        "ada": notifications_in(ada, month, count=3),
        "bob": notifications_in(bob, month, count=1),
    }
    # Counted by /metrics as time would have done (retention counts what is not).
    accepted_counts_fold()
    delivery_counts_fold()
    snapshot = table_snapshot(month)
    assert list(retention_run(now=clock).archived) == [f"{month:%Y-%m}"]
    return month, notifications, snapshot


def table_snapshot(month) -> dict[str, list[tuple]]:
    """Every row of the month's partitions, sorted, as the database gives them."""
    rows = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"SELECT * FROM {table}_p{month:%Y_%m} ORDER BY 1")
            rows[table] = cursor.fetchall()
    return rows


def test_a_restored_month_has_every_row_back_as_it_was(archived_month, clock):
    month, notifications, snapshot = archived_month
    out = StringIO()

    call_command("history_restore", "--month", f"{month:%Y-%m}", stdout=out)

    assert table_snapshot(month) == snapshot
    assert "notify_notification: 4 restored of 4 in the archive" in out.getvalue()
    assert "deliveries_deliveryattempt: 8 restored of 8" in out.getvalue()
    assert ArchivedMonth.objects.get(month=month).restored_at is not None
    # The ORM reads them like any other month's.
    ada_ids = [n.pk for n in notifications["ada"]]
    assert Delivery.objects.filter(notification_id__in=ada_ids).count() == 6
    assert DeliveryAttempt.objects.filter(delivery__notification_id__in=ada_ids).count() == 6

    # Twice is once.
    again = month_restore(month=month)
    assert again.inserted == dict.fromkeys(TABLES, 0)
    assert table_snapshot(month) == snapshot


def test_one_persons_restore_brings_back_only_their_rows(archived_month):
    month, _, _ = archived_month

    report = month_restore(month=month, user_id="ada")

    assert report.inserted == {
        "notify_notification": 3,
        "notify_feedentry": 3,
        "deliveries_delivery": 6,
        "deliveries_deliveryattempt": 6,
    }
    assert set(Notification.objects.values_list("recipient__user_id", flat=True)) == {"ada"}
    assert set(FeedEntry.objects.values_list("recipient__user_id", flat=True)) == {"ada"}
    assert Delivery.objects.exclude(recipient__user_id="ada").count() == 0
    # Bob's part follows when asked for.
    assert month_restore(month=month).inserted["notify_notification"] == 1


def test_restoring_a_month_not_archived_or_an_unknown_person_says_so(archived_month, clock):
    month, _, _ = archived_month
    with pytest.raises(CommandError, match="not in the archive"):
        call_command("history_restore", "--month", f"{months_back(clock, 9):%Y-%m}")
    with pytest.raises(CommandError, match="no recipient"):
        call_command("history_restore", "--month", f"{month:%Y-%m}", "--user-id", "nobody")
    with pytest.raises(CommandError, match="YYYY-MM"):
        call_command("history_restore", "--month", "last-june")


def test_a_restored_copy_is_dropped_after_the_keep_days_and_not_archived_again(
    archived_month, settings, clock
):
    month, _, _ = archived_month
    files = ArchivedMonth.objects.get(month=month).files
    month_restore(month=month)
    restored_at = ArchivedMonth.objects.get(month=month).restored_at

    kept = retention_run(now=restored_at + timedelta(days=settings.NOTIFY_RESTORE_KEEP_DAYS - 1))
    assert (kept.archived, kept.released) == ({}, [])
    assert partition_rows("notify_notification", month) == 4

    later = restored_at + timedelta(days=settings.NOTIFY_RESTORE_KEEP_DAYS, seconds=1)
    released = retention_run(now=later)

    assert (released.archived, released.released) == ({}, [f"{month:%Y-%m}"])
    assert month not in history_months()
    record = ArchivedMonth.objects.get(month=month)
    assert record.files == files and record.restored_at is None


def test_an_archive_file_that_does_not_match_its_checksum_is_not_restored(archived_month):
    month, _, _ = archived_month
    url = ArchivedMonth.objects.get(month=month).files["deliveries_delivery"]["url"]
    table = pq.read_table(url)
    pq.write_table(table.slice(1), url)  # a row lost behind retention's back

    with pytest.raises(ArchiveMismatch):
        month_restore(month=month)

    assert ArchivedMonth.objects.get(month=month).restored_at is None
    assert not Notification.objects.exists()
