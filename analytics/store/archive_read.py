"""A person's history past retention: the history archive's Parquet files read in place by
the store's engine, merged with the store's detail rows.

Retention archives each month of history to `{NOTIFY_ARCHIVE_URL}/{table}/YYYY-MM.parquet`
(history/archive.py) and drops its partitions. ClickHouse reads those files where they
are, through a table function chosen by the file's URL (`ARCHIVE_TABLE_FUNCTIONS`): a
local path or `file://` through `file()`, `http(s)://` through `url()`, `s3://` through
`s3()`. Nothing is restored into PostgreSQL. With the embedded store the `analytics`
process reads them (so the archive must be reachable from it, as it is from the workers);
with a ClickHouse server, the server does (`file()` then only reads under its
`user_files_path`).

The archive names people by their recipient's primary key (`recipient_id`), never by user
id; the store names them by a keyed hash of the user id. A caller therefore looks the
person's recipient up in PostgreSQL first and passes both: an erased person has no
recipient (and no rows left in the archive or the store), and a user id registered again
after an erasure is a new recipient whose key matches none of the old rows.

This module imports no app (it sits below the ground floor with the rest of the store):
the caller passes the archived months' file URLs and maps category ids to keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

from analytics.store.reports import person_history

# The archive's tables read here (history/partitions.py names them).
NOTIFICATIONS_TABLE = "notify_notification"
DELIVERIES_TABLE = "deliveries_delivery"
# The columns read from each file, as ClickHouse should type them (the archive stores
# uuids as text and timestamps as microseconds in UTC; docs/history.md). Only these are
# read from the Parquet files.
NOTIFICATION_COLUMNS = (
    "id Nullable(String), producer_id Nullable(Int64), recipient_id Nullable(Int64),"
    " category_id Nullable(Int64)"
)
DELIVERY_COLUMNS = (
    "id Nullable(Int64), notification_id Nullable(String), channel Nullable(String),"
    " status Nullable(String), reason Nullable(String), attempts Nullable(Int64),"
    " last_error Nullable(String), accepted_at Nullable(DateTime64(6, 'UTC'))"
)
# URL scheme → the ClickHouse table function that reads such a file in place.
ARCHIVE_TABLE_FUNCTIONS = {"": "file", "file": "file", "http": "url", "https": "url", "s3": "s3"}
# The kind of an archived delivery in a history page (the store's events have their own).
ARCHIVE_KIND = "delivery"
# Glob characters: file() and s3() would expand them, so a path holding one is refused.
_GLOB = re.compile(r"[*?{}\[\]]")


# A page's cursor: milliseconds since the epoch and an id, an event's or, with "-a", an
# archived delivery's (any such value is a place in the order, so every one is accepted).
HISTORY_CURSOR = r"^[0-9]{1,15}-[0-9]{1,20}(-a)?$"
# Past every event and delivery id: a page that starts at a time takes all of that instant.
LAST_ID = 2**64 - 1
# The last millisecond a cursor may name (the end of year 9999).
_LATEST_MS = 253_402_300_799_000


@dataclass(frozen=True)
class PageStart:
    """Where a history page starts, for each source: entries are ordered by (time, id),
    and at an equal (time, id) an event before an archived delivery, so a page after an
    event still takes an archived delivery of that very (time, id)."""

    before: datetime
    before_id: int = LAST_ID
    archive_before_id: int = LAST_ID


def page_start_from_cursor(cursor: str) -> PageStart:
    """The start of the page after the entry whose `cursor` this is (HISTORY_CURSOR)."""
    millis, event_id, *archived = cursor.split("-")
    moment = datetime.fromtimestamp(min(int(millis), _LATEST_MS) / 1000, tz=UTC)
    row_id = min(int(event_id), LAST_ID)
    return PageStart(
        before=moment,
        before_id=row_id,
        archive_before_id=row_id if archived else min(row_id + 1, LAST_ID),
    )


class ArchiveNotReadable(Exception):
    """An archive file's URL is of a kind the engine cannot read in place."""


@dataclass(frozen=True)
class ArchivedMonthFiles:
    """Where one archived month's notifications and deliveries are."""

    month: str
    notifications_url: str
    deliveries_url: str


def archive_source(url: str) -> tuple[str, str]:
    """The table function that reads the Parquet file at `url` where it is, and the path
    or URL to give it (as a query parameter, never spliced into the SQL)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""  # "C:" is a drive
    function = ARCHIVE_TABLE_FUNCTIONS.get(scheme)
    if function is None:
        raise ArchiveNotReadable(f"{url}: the store cannot read {scheme}:// in place")
    if function == "file":
        where = unquote(parts.path) if scheme == "file" else url
        where = str(Path(where).resolve())
    else:
        where = url
    if _GLOB.search(where):
        raise ArchiveNotReadable(f"{url}: glob characters in an archive path")
    return function, where


def _month_select(index: int, month: ArchivedMonthFiles, params: dict, by_producer: bool) -> str:
    n_function, params[f"n{index}"] = archive_source(month.notifications_url)
    d_function, params[f"d{index}"] = archive_source(month.deliveries_url)
    producer = " AND producer_id = {producer:Int64}" if by_producer else ""
    return (
        "SELECT toDateTime64(d.accepted_at, 3, 'UTC') AS at, d.id AS delivery_id,"
        " d.status AS status, d.channel AS channel, d.reason AS reason,"
        " d.attempts AS attempts, d.last_error AS last_error, n.id AS notification_id,"
        " n.category_id AS category_id, n.producer_id AS producer_id"
        f" FROM {d_function}({{d{index}:String}}, 'Parquet', {{deliveries:String}}) AS d"
        " INNER JOIN (SELECT id, category_id, producer_id"
        f" FROM {n_function}({{n{index}:String}}, 'Parquet', {{notifications:String}})"
        f" WHERE recipient_id = {{recipient:Int64}}{producer}) AS n"
        " ON d.notification_id = n.id"
    )


def archive_person_deliveries(
    *,
    store,
    months: list[ArchivedMonthFiles],
    recipient_pk: int,
    producer_id: int | None,
    before: datetime,
    before_id: int,
    limit: int,
) -> list[dict]:
    """The recipient's archived deliveries (of this producer's notifications; every
    producer's when `producer_id` is None) in `months`, before (`before`, `before_id`)
    in the order (accepted at, delivery id), newest first, read from the Parquet files
    in place. Each as it ended: status, reason, attempts, last error."""
    if not months or limit <= 0:
        return []
    params: dict = {
        "recipient": recipient_pk,
        "notifications": NOTIFICATION_COLUMNS,
        "deliveries": DELIVERY_COLUMNS,
        "before": before.isoformat(),
        "before_id": before_id,
        "limit": limit,
    }
    if producer_id is not None:
        params["producer"] = producer_id
    union = " UNION ALL ".join(
        _month_select(i, month, params, producer_id is not None) for i, month in enumerate(months)
    )
    rows = store.query(
        "SELECT toString(at), status, channel, category_id, reason, delivery_id,"
        " notification_id, attempts, last_error, producer_id"
        f" FROM ({union})"
        " WHERE (at, toUInt64(delivery_id))"
        " < (parseDateTime64BestEffort({before:String}, 3, 'UTC'), {before_id:UInt64})"
        " ORDER BY at DESC, delivery_id DESC LIMIT {limit:UInt32}",
        params,
    )
    return [
        {
            "occurred_at": row[0],
            "kind": ARCHIVE_KIND,
            "status": row[1] or "",
            "channel": row[2] or "",
            "category_id": row[3],
            "provider": "",
            "reason": row[4] or "",
            "delivery_id": int(row[5]),
            "notification_id": row[6] or "",
            "attempts": int(row[7] or 0),
            "last_error": row[8] or "",
            "producer_id": int(row[9] or 0),
            "source": "archive",
            "cursor": f"{_epoch_ms(row[0])}-{int(row[5])}-a",
        }
        for row in rows
    ]


def _epoch_ms(text: str) -> int:
    moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def _order(entry: dict) -> tuple[int, int, int]:
    millis, row_id, *archived = entry["cursor"].split("-")
    return int(millis), int(row_id), 0 if archived else 1


def person_history_past_retention(
    *,
    store,
    producer_id: int | None,
    person: str,
    recipient_pk: int | None,
    months: list[ArchivedMonthFiles],
    start: PageStart,
    limit: int,
) -> list[dict]:
    """One page of a person's history from `start`, newest first: the store's events
    (`source` "events") and, for the archived `months`, their archived deliveries read in
    place (`source` "archive"), in one order (`PageStart`); each entry's `cursor` is where
    the page after it starts. `producer_id` None: every producer's (support's page);
    `recipient_pk` None: the person has no recipient, so the archive has nothing of
    theirs."""
    events = [
        {**event, "source": "events", "status": "", "attempts": 0, "last_error": ""}
        for event in person_history(
            store=store,
            producer_id=producer_id,
            person=person,
            before=start.before,
            before_id=start.before_id,
            limit=limit,
        )
    ]
    archived = []
    if recipient_pk is not None:
        archived = archive_person_deliveries(
            store=store,
            months=months,
            recipient_pk=recipient_pk,
            producer_id=producer_id,
            before=start.before,
            before_id=start.archive_before_id,
            limit=limit,
        )
    return sorted(events + archived, key=_order, reverse=True)[:limit]
