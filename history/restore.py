"""Restoring an archived month for support: its rows back into the database, all of them or
one person's, for NOTIFY_RESTORE_KEEP_DAYS (retention then drops them again, without
archiving them a second time).

The erasure ledger is applied on every restore: rows of a recipient id the ledger names,
or of a recipient who no longer exists, are not brought back. Rows already in the
database are left as they are, so restoring twice changes nothing. See docs/history.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from django.apps import apps
from django.db import connection, models, transaction
from django.utils import timezone

from history.archive import ArchiveMismatch, RowDigest, file_batches, table_columns
from history.models import ArchivedMonth, MonthState
from history.partitions import HISTORY_TABLES, HistoryTable, month_partition_create
from notify.models import Erasure, Notification, Recipient


class RestoreError(Exception):
    """The month cannot be restored as asked (not archived, no such person)."""


@dataclass
class RestoreReport:
    """Per table: rows in the archive file, and rows inserted (the rest were already in
    the database, erased, of a recipient gone, or not the person asked for)."""

    month: date
    in_archive: dict[str, int] = field(default_factory=dict)
    inserted: dict[str, int] = field(default_factory=dict)


def month_restore(*, month: date, user_id: str | None = None) -> RestoreReport:
    """Put an archived month's rows back, or only those of the recipient with this product
    user id (their notifications, those notifications' feed entries and deliveries, and
    those deliveries' attempts). One transaction; marks the month restored.

    Each file is checked against the row count and checksum recorded for it while it is
    read; a file that does not match raises ArchiveMismatch and nothing is restored.
    """
    if not ArchivedMonth.objects.filter(month=month, state=MonthState.ARCHIVED).exists():
        raise RestoreError(f"{month:%Y-%m} is not in the archive")
    person = None
    if user_id is not None:
        person = Recipient.objects.filter(user_id=user_id).values_list("pk", flat=True).first()
        if person is None:
            raise RestoreError(f"no recipient has user id {user_id!r} (erased, or never known)")
    report = RestoreReport(month=month)
    with transaction.atomic():
        record = ArchivedMonth.objects.select_for_update().get(month=month)
        for t in HISTORY_TABLES:
            month_partition_create(t, month)
        # Parents first: a feed entry, delivery or attempt comes back only if its
        # notification (or delivery) is in the database.
        for t in HISTORY_TABLES:
            entry = record.files[t.table]
            stage, columns = _stage(t.table, entry)
            report.in_archive[t.table] = entry["rows"]
            report.inserted[t.table] = _insert_from_stage(t, stage, columns, person=person)
        record.restored_at = timezone.now()
        record.save(update_fields=["restored_at"])
    return report


def _stage(table: str, entry: dict) -> tuple[str, list[str]]:
    """Copy an archive file into a temporary table shaped like `table`, checking it
    against its recorded rows and checksum; returns the temporary table and the columns
    the file has that the table still has."""
    stage = f"restore_{table}"
    current = {c.name for c in table_columns(table)}
    digest = RowDigest()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {stage}")
        cursor.execute(f"CREATE TEMPORARY TABLE {stage} (LIKE {table}) ON COMMIT DROP")
        columns: list[str] | None = None
        for batch in file_batches(entry["url"]):
            names = batch.schema.names
            if columns is None:
                columns = [name for name in names if name in current]
            keep = [names.index(name) for name in columns]
            rows = list(zip(*(c.to_pylist() for c in batch.columns), strict=True))
            digest.update(rows)
            quoted = ", ".join(f'"{name}"' for name in columns)
            # The raw psycopg cursor: COPY is the fast way in, and it parses each
            # value's text form (uuid, json) as the column's type.
            with cursor.cursor.copy(f"COPY {stage} ({quoted}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row([row[i] for i in keep])
    if (digest.rows, digest.sha256) != (entry["rows"], entry["sha256"]):
        raise ArchiveMismatch(f"{entry['url']}: does not match the row count and checksum recorded")
    return stage, columns or []


def _insert_from_stage(t: HistoryTable, stage: str, columns: list[str], *, person) -> int:
    if not columns:
        return 0
    model = _history_model(t.table)
    conditions = [_parent_present(model, "s", person=person is not None)]
    for f in model._meta.concrete_fields:
        if not f.is_relation or _is_history(f.related_model):
            continue
        if f.related_model is Recipient:
            conditions.append(
                f"NOT EXISTS (SELECT 1 FROM {Erasure._meta.db_table} e "
                f"WHERE e.recipient_pk = s.{f.column})"
            )
        if f.db_constraint:
            # A row whose producer, category, recipient or template version is gone would
            # break its foreign key: it is left out, as a person gone is.
            target = f.related_model._meta
            conditions.append(
                f"(s.{f.column} IS NULL OR EXISTS (SELECT 1 FROM {target.db_table} r "
                f"WHERE r.{f.target_field.column} = s.{f.column}))"
            )
    quoted = ", ".join(f'"{name}"' for name in columns)
    selected = ", ".join(f's."{name}"' for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {t.table} ({quoted}) SELECT {selected} FROM {stage} s "
            f"WHERE {' AND '.join(conditions)} ON CONFLICT DO NOTHING",
            {"person": person},
        )
        return cursor.rowcount


def _parent_present(model: type[models.Model], alias: str, *, person: bool) -> str:
    """SQL: the row `alias` hangs on a notification in the database (through its delivery
    for an attempt), of the person asked for when there is one."""
    if model is Notification:
        return f"{alias}.recipient_id = %(person)s" if person else "TRUE"
    [link] = [
        f for f in model._meta.concrete_fields if f.is_relation and _is_history(f.related_model)
    ]
    parent = link.related_model
    parent_key = _history_table(parent._meta.db_table).key
    key = _history_table(model._meta.db_table).key
    p = f"{alias}p"
    return (
        f"EXISTS (SELECT 1 FROM {parent._meta.db_table} {p} "
        f"WHERE {p}.{link.target_field.column} = {alias}.{link.column} "
        f"AND {p}.{parent_key} = {alias}.{key} AND {_parent_present(parent, p, person=person)})"
    )


def _history_table(table: str) -> HistoryTable:
    [t] = [t for t in HISTORY_TABLES if t.table == table]
    return t


def _is_history(model: type[models.Model]) -> bool:
    return any(t.table == model._meta.db_table for t in HISTORY_TABLES)


def _history_model(table: str) -> type[models.Model]:
    [model] = [m for m in apps.get_models() if m._meta.db_table == table]
    return model
