"""The archive of history: one Parquet file per table and month, its checksum, and taking
erased people out of it.

A month's partition of each history table becomes `{NOTIFY_ARCHIVE_URL}/{table}/YYYY-MM.parquet`
(any fsspec URL). Columns keep the table's names; uuid, json and anything without a
plain Arrow match are stored as their PostgreSQL text form, timestamps as
timestamp[us, UTC]. Every file has a checksum: SHA-256 over a canonical serialization of
its rows in file order (`RowDigest`), computed from the database rows while writing and
again from the file when it is read back, so a file counts as archived only once what is
in it is what was in the partition.

Erased people are taken out of archived months by rewriting the files that hold them
(`archive_erase_recipient`); the erasure ledger says which ones each month still has to
lose (`archive_ledger_apply`, run by retention), so an erasure whose archive part failed
is finished later rather than forgotten. See docs/history.md.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import logging
import posixpath
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any

import fsspec
from django.conf import settings
from django.db import connection, transaction

from deliveries.models import Delivery, DeliveryAttempt
from history.models import ArchivedMonth, MonthState
from notify.models import Erasure, FeedEntry, Notification

logger = logging.getLogger(__name__)


class _ImportedOnFirstUse:
    """A module imported when one of its names is first read. Every web process and
    worker imports this module (erasure and retention need it), and pyarrow with numpy
    are a sixth of a process's start-up; only archiving and erasing in archives use them."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attribute)


if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
else:
    pa = _ImportedOnFirstUse("pyarrow")
    pc = _ImportedOnFirstUse("pyarrow.compute")
    pq = _ImportedOnFirstUse("pyarrow.parquet")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@functools.cache
def _arrow_types() -> dict[str, pa.DataType]:
    """PostgreSQL types stored as the same Arrow type; anything else is stored as its
    text form."""
    return {
        "smallint": pa.int16(),
        "integer": pa.int32(),
        "bigint": pa.int64(),
        "boolean": pa.bool_(),
        "real": pa.float32(),
        "double precision": pa.float64(),
        "date": pa.date32(),
        "timestamp with time zone": pa.timestamp("us", tz="UTC"),
        "text": pa.string(),
    }


@dataclass(frozen=True)
class ArchiveColumn:
    """A table column as the archive stores it."""

    name: str
    pg_type: str

    @property
    def arrow_type(self) -> pa.DataType:
        return _arrow_types().get(self.pg_type, pa.string())

    @property
    def select(self) -> str:
        """The expression that reads it: text when Arrow has no type of its own for it."""
        if self.pg_type in _arrow_types() or self.pg_type.startswith("character"):
            return f'"{self.name}"'
        return f'"{self.name}"::text'


@dataclass(frozen=True)
class ArchiveFile:
    """One archive file as verified: where it is, how many rows, their checksum."""

    url: str
    rows: int
    sha256: str

    def as_json(self) -> dict[str, Any]:
        return {"url": self.url, "rows": self.rows, "sha256": self.sha256}


class ArchiveMismatch(Exception):
    """A file read back does not hold what was written (or what the month records)."""


def archive_url(table: str, month: date) -> str:
    """Where `table`'s rows of `month` are archived."""
    return f"{settings.NOTIFY_ARCHIVE_URL.rstrip('/')}/{table}/{month:%Y-%m}.parquet"


def table_columns(table: str) -> list[ArchiveColumn]:
    """The columns of `table` in their order in the table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            [table],
        )
        return [ArchiveColumn(name, pg_type) for name, pg_type in cursor.fetchall()]


def arrow_schema(columns: list[ArchiveColumn]) -> pa.Schema:
    return pa.schema([pa.field(c.name, c.arrow_type) for c in columns])


def _canonical(value: Any) -> Any:
    # Timestamps as integer microseconds since the epoch: the same number whichever time
    # zone the database driver or Arrow hands them back in.
    if isinstance(value, datetime):
        return (value - _EPOCH) // _MICROSECOND
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


class RowDigest:
    """Row count and SHA-256 of rows, each serialized as a compact JSON array of its
    canonical values and a newline: unambiguous, and the same for a row fetched from
    PostgreSQL and for that row read back from Parquet."""

    def __init__(self) -> None:
        self.rows = 0
        self._hash = hashlib.sha256()

    def update(self, rows: Iterable[tuple]) -> None:
        for row in rows:
            line = json.dumps(
                [_canonical(v) for v in row], ensure_ascii=False, separators=(",", ":")
            )
            self._hash.update(line.encode())
            self._hash.update(b"\n")
            self.rows += 1

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def _batch_rows(batch: pa.RecordBatch) -> Iterator[tuple]:
    return zip(*(column.to_pylist() for column in batch.columns), strict=True)


def partition_export(*, table: str, partition: str, url: str) -> ArchiveFile:
    """Write every row of `partition` (a partition of `table`) to a Parquet file at `url`,
    streaming through a server-side cursor; returns the rows written and their checksum.

    Must run in a transaction (the server-side cursor lives in it); the caller locks the
    partition so that what is counted, written and dropped is the same set of rows. An
    empty partition gives a file with the columns and no rows.
    """
    columns = table_columns(table)
    schema = arrow_schema(columns)
    digest = RowDigest()
    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    query = f"SELECT {', '.join(c.select for c in columns)} FROM {partition}"
    with (
        fs.open(path, "wb") as out,
        pq.ParquetWriter(out, schema) as writer,
        connection.chunked_cursor() as cursor,
    ):
        cursor.execute(query)
        while rows := cursor.fetchmany(settings.NOTIFY_ARCHIVE_BATCH_ROWS):
            digest.update(rows)
            arrays = [
                pa.array([row[i] for row in rows], type=c.arrow_type) for i, c in enumerate(columns)
            ]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return ArchiveFile(url=url, rows=digest.rows, sha256=digest.sha256)


def file_batches(url: str, *, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The record batches of an archive file, NOTIFY_ARCHIVE_BATCH_ROWS rows at a time."""
    fs, path = fsspec.core.url_to_fs(url)
    with fs.open(path, "rb") as source:
        parquet = pq.ParquetFile(source)
        yield from parquet.iter_batches(
            batch_size=settings.NOTIFY_ARCHIVE_BATCH_ROWS, columns=columns
        )


def file_read_digest(url: str) -> ArchiveFile:
    """Read a whole archive file back and compute its row count and checksum."""
    digest = RowDigest()
    for batch in file_batches(url):
        digest.update(_batch_rows(batch))
    return ArchiveFile(url=url, rows=digest.rows, sha256=digest.sha256)


def file_remove(url: str) -> None:
    """Delete an archive file if it is there; a failure is logged, not raised (the caller
    is already handling one)."""
    try:
        fs, path = fsspec.core.url_to_fs(url)
        if fs.exists(path):
            fs.rm(path)
    except Exception:
        logger.exception("could not remove archive file %s", url)


# --- Erased people in the archive ---------------------------------------------------------


def erasure_watermark() -> int:
    """The newest erasure ledger id such that every entry up to it is committed.

    Ledger ids come from a sequence, so a newer id can commit before an older one; a short
    SHARE lock on the ledger waits for the erasures being written to finish, and every
    later one gets a higher id.
    """
    table = Erasure._meta.db_table
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {table} IN SHARE MODE")
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
        return cursor.fetchone()[0]


def archive_erase_recipient(recipient_pk: int) -> int:
    """Take one erased recipient's rows out of every archived month's files; returns the
    rows removed. Idempotent; raises when the archive cannot be read or written (the
    ledger still names the person, so `archive_ledger_apply` finishes it later)."""
    months = ArchivedMonth.objects.filter(state=MonthState.ARCHIVED).values_list("month", flat=True)
    return sum(month_files_erase(month=month, recipient_pks={recipient_pk}) for month in months)


def archive_ledger_apply() -> int:
    """Take out of each archived month every recipient the erasure ledger named since the
    month's files were last known clean (`ArchivedMonth.erased_through`); returns the rows
    removed. A month that fails is logged at ERROR and tried again on the next run."""
    watermark = erasure_watermark()
    removed = 0
    pending = ArchivedMonth.objects.filter(
        state=MonthState.ARCHIVED, erased_through__lt=watermark
    ).order_by("month")
    for record in pending:
        recipient_pks = set(
            Erasure.objects.filter(pk__gt=record.erased_through, pk__lte=watermark)
            .exclude(recipient_pk=None)
            .values_list("recipient_pk", flat=True)
        )
        try:
            removed += month_files_erase(
                month=record.month, recipient_pks=recipient_pks, erased_through=watermark
            )
        except Exception:
            logger.exception("archive of %s: erasures not applied yet", f"{record.month:%Y-%m}")
    return removed


@contextmanager
def _month_files_lock(month: date) -> Iterator[None]:
    """Serialize rewrites of one month's files (an erasure and retention's catch-up, or two
    erasures, would otherwise each write a file still holding the other's person)."""
    key = month.year * 12 + month.month
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(hashtext('notify.history.archive'), %s)", [key])
        try:
            yield
        finally:
            cursor.execute(
                "SELECT pg_advisory_unlock(hashtext('notify.history.archive'), %s)", [key]
            )


def _gone(batch: pa.RecordBatch, drop: dict[str, pa.Array]) -> pa.Array:
    """Per row: whether any column named in `drop` holds one of its values."""
    gone = pa.array([False] * batch.num_rows)
    for column, values in drop.items():
        hit = pc.fill_null(pc.is_in(batch.column(column), value_set=values), False)
        gone = pc.or_(gone, hit)
    return gone


def _matching(url: str, drop: dict[str, pa.Array], *, collect: str) -> list:
    """The `collect` values of the rows `drop` matches, reading only the columns needed."""
    found: list = []
    for batch in file_batches(url, columns=sorted({*drop, collect})):
        found += batch.filter(_gone(batch, drop)).column(collect).to_pylist()
    return found


def _file_rewrite_without(url: str, drop: dict[str, pa.Array]) -> tuple[ArchiveFile, int]:
    """Write the file again without the rows where any column named in `drop` has one of
    its values, as `<url>.new`, and verify it; returns the new file (at `url`, where
    `_file_replace` puts it) and how many rows were left out."""
    fs, path = fsspec.core.url_to_fs(url)
    new_url = f"{url}.new"
    with fs.open(path, "rb") as source:
        schema = pq.read_schema(source)
    digest, dropped = RowDigest(), 0
    with fs.open(f"{path}.new", "wb") as out, pq.ParquetWriter(out, schema) as writer:
        for batch in file_batches(url):
            kept = batch.filter(pc.invert(_gone(batch, drop)))
            dropped += batch.num_rows - kept.num_rows
            digest.update(_batch_rows(kept))
            writer.write_batch(kept)
    read_back = file_read_digest(new_url)
    if (read_back.rows, read_back.sha256) != (digest.rows, digest.sha256):
        file_remove(new_url)
        raise ArchiveMismatch(f"{new_url}: the rewritten file does not read back as written")
    return ArchiveFile(url=url, rows=digest.rows, sha256=digest.sha256), dropped


def _file_replace(url: str) -> None:
    fs, path = fsspec.core.url_to_fs(url)
    fs.mv(f"{path}.new", path)


def month_files_erase(
    *, month: date, recipient_pks: set[int], erased_through: int | None = None
) -> int:
    """Rewrite the month's archive files without these recipients: their notifications,
    their feed entries, the deliveries to them or of their notifications, and those
    deliveries' attempts. Only files that hold any of it are rewritten. Returns the rows
    removed; `erased_through`, when given, is recorded once the month is clean up to it.

    Children go first and the notifications file last: until the notifications file is
    rewritten it still tells which deliveries and attempts belong to the person, so a
    rewrite cut short is finished by running this again. Each file's new row count and
    checksum is recorded before the new file replaces the old one: if the replace does
    not happen, the old file still holds the person and the next run rewrites it again.
    """
    with _month_files_lock(month):
        record = ArchivedMonth.objects.filter(month=month, state=MonthState.ARCHIVED).first()
        if record is None:
            return 0
        removed = 0
        if recipient_pks:
            removed = _month_files_rewrite(record, recipient_pks)
        if erased_through is not None and erased_through > record.erased_through:
            ArchivedMonth.objects.filter(pk=record.pk).update(erased_through=erased_through)
    if removed:
        logger.info("archive of %s: %s rows of erased people removed", f"{month:%Y-%m}", removed)
    return removed


def _month_files_rewrite(record: ArchivedMonth, recipient_pks: set[int]) -> int:
    urls = {table: entry["url"] for table, entry in record.files.items()}
    notification_t, feed_t = Notification._meta.db_table, FeedEntry._meta.db_table
    delivery_t, attempt_t = Delivery._meta.db_table, DeliveryAttempt._meta.db_table
    people = pa.array(sorted(recipient_pks), pa.int64())
    by_person = {"recipient_id": people}
    notification_ids = pa.array(
        _matching(urls[notification_t], by_person, collect="id"), pa.string()
    )
    by_notification = {"recipient_id": people, "notification_id": notification_ids}
    delivery_ids = pa.array(
        sorted(set(_matching(urls[delivery_t], by_notification, collect="id"))), pa.int64()
    )
    by_delivery = {"delivery_id": delivery_ids}
    # Whether each file holds any of it (None: only reading it tells); only those that do
    # are rewritten.
    plan = [
        (attempt_t, by_delivery, None if len(delivery_ids) else False),
        (delivery_t, by_notification, len(delivery_ids) > 0),
        (feed_t, by_notification, None),
        (notification_t, by_person, len(notification_ids) > 0),
    ]
    removed = 0
    for table, drop, holds in plan:
        if holds is None:
            holds = bool(_matching(urls[table], drop, collect=next(iter(drop))))
        if not holds:
            continue
        rewritten, dropped = _file_rewrite_without(urls[table], drop)
        record.files[table] = rewritten.as_json()
        ArchivedMonth.objects.filter(pk=record.pk).update(files=record.files)
        _file_replace(urls[table])
        removed += dropped
    return removed
