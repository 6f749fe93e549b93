"""Retention: months of history past NOTIFY_RETENTION_DAYS are written to the archive,
verified, and only then dropped from the database.

One month is one transaction: its four partitions are locked against writes, each is
exported to Parquet and read back (row count against the partition's, checksum against
the one computed while writing), the rows of other tables that hang on the month's
notifications and deliveries are deleted, the partitions are dropped and the month is
recorded as archived. Anything that fails rolls all of it back and is recorded as a
failed month, and the run goes on with the next one. See docs/history.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.db import connection, models, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Max
from django.db.models.expressions import RawSQL
from django.utils import timezone

from deliveries.counts import delivery_counts_retire
from deliveries.models import Delivery
from deliveries.pipeline.digests import digests_retire
from history.archive import (
    ArchiveFile,
    ArchiveMismatch,
    archive_ledger_apply,
    archive_url,
    erasure_watermark,
    file_read_digest,
    file_remove,
    partition_export,
)
from history.models import ArchivedMonth, MonthState
from history.partitions import (
    HISTORY_TABLES,
    default_partition_rows,
    history_months,
    month_bounds,
    partition_name,
    partitions_ensure,
)
from notify.counts import PENDING as NOTIFICATION_PENDING
from notify.counts import accepted_counts_settle
from notify.models import Erasure, Notification

logger = logging.getLogger(__name__)


@dataclass
class RetentionReport:
    """What one retention run did."""

    archived: dict[str, dict[str, int]] = field(default_factory=dict)  # month → table → rows
    failed: dict[str, str] = field(default_factory=dict)  # month → error
    released: list[str] = field(default_factory=list)  # restored copies dropped again
    archive_rows_erased: int = 0
    busy: bool = False  # another run holds the retention lock


@dataclass(frozen=True)
class MonthArchived:
    """One month's archive attempt: its verified files, or the error that stopped it."""

    files: dict[str, ArchiveFile]
    error: str


@dataclass(frozen=True)
class RetentionStatus:
    """What a metrics scrape reports about retention (see `retention_status`)."""

    months_pending: int
    months_failed: int
    default_partition_rows: int
    months_erasure_pending: int


def month_past_retention(month: date, *, now: datetime, retention_days: int) -> bool:
    """Whether the month ended more than `retention_days` before `now`."""
    return month_bounds(month)[1] <= now - timedelta(days=retention_days)


def restored_copy_expired(restored_at: datetime, *, now: datetime, keep_days: int) -> bool:
    """Whether rows restored for support at `restored_at` have been kept long enough."""
    return restored_at <= now - timedelta(days=keep_days)


def retention_run(now: datetime | None = None) -> RetentionReport:
    """Archive and drop every month past retention; drop restored copies kept long enough;
    finish taking erased people out of archived months. Safe to run at any time and again:
    a second run while one is going returns at once (`busy`)."""
    now = now or timezone.now()
    report = RetentionReport()
    with _run_lock() as acquired:
        if not acquired:
            report.busy = True
            return report
        # Rows stranded in a default partition get their month first, or they would be
        # left behind when the months around them are dropped.
        partitions_ensure(now=now)
        try:
            report.archive_rows_erased = archive_ledger_apply()
        except Exception:
            logger.exception("retention: erasures not applied to the archive yet")
        records = {r.month: r for r in ArchivedMonth.objects.all()}
        for month in _months_due(now):
            record = records.get(month)
            if record is not None and record.state == MonthState.ARCHIVED:
                if _restored_copy_release(month, now=now):
                    report.released.append(f"{month:%Y-%m}")
                continue
            outcome = month_archive(month, now=now)
            if outcome.error:
                report.failed[f"{month:%Y-%m}"] = outcome.error
            else:
                report.archived[f"{month:%Y-%m}"] = {t: f.rows for t, f in outcome.files.items()}
    return report


def retention_status(now: datetime | None = None) -> RetentionStatus:
    """Cheap numbers for /metrics: months past retention still in the database (restored
    copies within NOTIFY_RESTORE_KEEP_DAYS not counted), months whose last archive attempt
    failed, rows waiting in the default partitions, and archived months whose files still
    have erasure ledger entries to apply. A handful of catalog queries and counts."""
    now = now or timezone.now()
    records = {r.month: r for r in ArchivedMonth.objects.all()}
    pending = 0
    for month in _months_due(now):
        record = records.get(month)
        if (
            record is not None
            and record.state == MonthState.ARCHIVED
            and record.restored_at is not None
            and not restored_copy_expired(
                record.restored_at, now=now, keep_days=settings.NOTIFY_RESTORE_KEEP_DAYS
            )
        ):
            continue
        pending += 1
    latest_erasure = _latest_erasure_id()
    return RetentionStatus(
        months_pending=pending,
        months_failed=sum(r.state == MonthState.FAILED for r in records.values()),
        default_partition_rows=sum(default_partition_rows().values()),
        months_erasure_pending=sum(
            r.state == MonthState.ARCHIVED and r.erased_through < latest_erasure
            for r in records.values()
        ),
    )


def _counts_settle(month: date, cursor: CursorWrapper) -> None:
    """Before the month leaves, the /metrics rollups take what they have not counted yet:
    its notifications stay counted as accepted, its deliveries as what they ended as (one
    still on its way after months never will be). Done before the export, so a restored
    copy comes back already counted."""
    notifications = partition_name(Notification._meta.db_table, month)
    cursor.execute(f"SELECT id FROM {notifications} WHERE {NOTIFICATION_PENDING}")
    accepted_counts_settle(notification_ids=[row[0] for row in cursor.fetchall()])
    delivery_counts_retire(partition=partition_name(Delivery._meta.db_table, month))


def month_archive(month: date, *, now: datetime) -> MonthArchived:
    """Export, verify and drop one month; returns its files, or the error that left it
    in the database (recorded as a failed month and logged at ERROR)."""
    written: list[str] = []
    try:
        watermark = erasure_watermark()
        with transaction.atomic(), connection.cursor() as cursor:
            partitions = [partition_name(t.table, month) for t in HISTORY_TABLES]
            cursor.execute(f"LOCK TABLE {', '.join(partitions)} IN SHARE MODE")
            _counts_settle(month, cursor)
            files = {}
            for t, partition in zip(HISTORY_TABLES, partitions, strict=True):
                url = archive_url(t.table, month)
                written.append(url)
                files[t.table] = _partition_archive(t.table, partition, url, cursor)
            _references_delete(month)
            # Digest windows hold delivery ids, not keys: they go with the deliveries.
            digests_retire(
                deliveries_partition=partition_name(Delivery._meta.db_table, month),
                month_end=month_bounds(month)[1],
            )
            _partitions_drop(cursor, partitions)
            ArchivedMonth.objects.update_or_create(
                month=month,
                defaults={
                    "state": MonthState.ARCHIVED,
                    "files": {table: f.as_json() for table, f in files.items()},
                    "error": "",
                    "attempted_at": now,
                    "archived_at": timezone.now(),
                    "restored_at": None,
                    "erased_through": watermark,
                },
            )
    except Exception as error:
        logger.exception("retention: %s not archived; it stays in the database", f"{month:%Y-%m}")
        for url in written:
            file_remove(url)
        message = f"{type(error).__name__}: {error}"
        ArchivedMonth.objects.update_or_create(
            month=month,
            defaults={"state": MonthState.FAILED, "error": message, "attempted_at": now},
        )
        return MonthArchived(files={}, error=message)
    logger.info("retention: %s archived and dropped", f"{month:%Y-%m}")
    return MonthArchived(files=files, error="")


def _partition_archive(table: str, partition: str, url: str, cursor) -> ArchiveFile:
    """Export one partition and check the file: rows as many as the partition has, and
    the checksum read back equal to the one computed from the rows written."""
    cursor.execute(f"SELECT count(*) FROM {partition}")
    (expected,) = cursor.fetchone()
    exported = partition_export(table=table, partition=partition, url=url)
    read_back = file_read_digest(url)
    if not expected == exported.rows == read_back.rows:
        raise ArchiveMismatch(
            f"{url}: {expected} rows in {partition}, {exported.rows} written, "
            f"{read_back.rows} read back"
        )
    if exported.sha256 != read_back.sha256:
        raise ArchiveMismatch(f"{url}: checksum read back differs from the one written")
    return read_back


def history_references() -> list[tuple[type[models.Model], models.Field]]:
    """(model, field) for every foreign key from a table outside history to a history
    table (event keys, the outbox, campaign holds, re-drives, test sends, ...): its rows
    go with the month their notification or delivery is in."""
    history = {t.table for t in HISTORY_TABLES}
    found = []
    for model in apps.get_models():
        if model._meta.db_table in history:
            continue
        for f in model._meta.concrete_fields:
            if f.is_relation and f.related_model._meta.db_table in history:
                found.append((model, f))
    return found


def _references_delete(month: date) -> None:
    for model, f in history_references():
        target = partition_name(f.related_model._meta.db_table, month)
        key = f.target_field.column
        rows = RawSQL(f"SELECT {key} FROM {target}", [])
        model._base_manager.filter(**{f"{f.attname}__in": rows}).delete()


def _restored_copy_release(month: date, *, now: datetime) -> bool:
    """Drop the partitions of an archived month that are back in the database, once they
    have been kept NOTIFY_RESTORE_KEEP_DAYS (the archive already holds them). Returns
    whether they were dropped."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            record = ArchivedMonth.objects.select_for_update().get(month=month)
            if record.restored_at is None:
                # Partitions came back without a restore (rows with an old date were
                # moved out of a default partition): the archive does not hold them.
                partitions_empty = not any(
                    _has_rows(cursor, partition_name(t.table, month)) for t in HISTORY_TABLES
                )
                if not partitions_empty:
                    logger.error(
                        "retention: %s is archived but has new rows in the database; "
                        "left in place for an operator",
                        f"{month:%Y-%m}",
                    )
                    return False
            elif not restored_copy_expired(
                record.restored_at, now=now, keep_days=settings.NOTIFY_RESTORE_KEEP_DAYS
            ):
                return False
            _counts_settle(month, cursor)
            _references_delete(month)
            # Digest windows hold delivery ids, not keys: they go with the deliveries.
            digests_retire(
                deliveries_partition=partition_name(Delivery._meta.db_table, month),
                month_end=month_bounds(month)[1],
            )
            _partitions_drop(cursor, [partition_name(t.table, month) for t in HISTORY_TABLES])
            record.restored_at = None
            record.save(update_fields=["restored_at"])
    except Exception:
        logger.exception("retention: restored copy of %s not dropped", f"{month:%Y-%m}")
        return False
    return True


def _partitions_drop(cursor, partitions: list[str]) -> None:
    # Dropping a partition locks its parent table exclusively: behind a long query that
    # would queue intake behind the drop, so past this the month fails and waits for the
    # next run.
    cursor.execute(
        "SELECT set_config('lock_timeout', %s, true)",
        [f"{int(settings.NOTIFY_RETENTION_DROP_LOCK_TIMEOUT * 1000)}ms"],
    )
    # Foreign-key checks still deferred on rows of these partitions (written earlier in
    # an enclosing transaction) would make PostgreSQL refuse the DROP: run them now.
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    for partition in reversed(partitions):
        cursor.execute(f"DROP TABLE {partition}")


def _has_rows(cursor, table: str) -> bool:
    cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {table})")
    return cursor.fetchone()[0]


def _months_due(now: datetime) -> Iterator[date]:
    for month in history_months():
        if month_past_retention(month, now=now, retention_days=settings.NOTIFY_RETENTION_DAYS):
            yield month


def _latest_erasure_id() -> int:
    return Erasure.objects.aggregate(latest=Max("id"))["latest"] or 0


@contextmanager
def _run_lock() -> Iterator[bool]:
    """One retention run at a time (beat's next run, the management command): a session
    lock, released when the run ends or its connection goes."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext('notify.history.retention'))")
        (acquired,) = cursor.fetchone()
        try:
            yield acquired
        finally:
            if acquired:
                cursor.execute("SELECT pg_advisory_unlock(hashtext('notify.history.retention'))")
