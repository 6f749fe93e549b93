"""The monthly partitions of history: which tables, how their months are named, and the
maintenance that creates months ahead and moves stray rows out of the default partition.

History is four tables partitioned by range of one timestamp, each row's notification's
`created_at`: notifications (`created_at`), feed entries, deliveries and attempts
(`accepted_at`, copied from the notification). A notification and everything that hangs
on it therefore live in the same month, and a month is archived or dropped as a whole.
Months are UTC calendar months; `<table>_pYYYY_MM` holds one, `<table>_default` anything
no month holds yet (it should stay empty: a row there is reported and moved).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from deliveries.models import Delivery, DeliveryAttempt
from notify.models import FeedEntry, Notification

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryTable:
    """A partitioned table and the column its months are taken from."""

    table: str
    key: str


# Parents first: a month is exported, verified and restored in this order.
HISTORY_TABLES = (
    HistoryTable(Notification._meta.db_table, "created_at"),
    HistoryTable(FeedEntry._meta.db_table, "accepted_at"),
    HistoryTable(Delivery._meta.db_table, "accepted_at"),
    HistoryTable(DeliveryAttempt._meta.db_table, "accepted_at"),
)


def month_of(at: datetime) -> date:
    """The first day of the UTC month `at` falls in."""
    at = at.astimezone(UTC)
    return date(at.year, at.month, 1)


def month_add(month: date, months: int) -> date:
    """The first day of the month `months` after (or before) `month`."""
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """[start, end) of the month, in UTC."""
    following = month_add(month, 1)
    return (
        datetime(month.year, month.month, 1, tzinfo=UTC),
        datetime(following.year, following.month, 1, tzinfo=UTC),
    )


def partition_name(table: str, month: date) -> str:
    """The partition of `table` that holds `month`."""
    return f"{table}_p{month:%Y_%m}"


def default_partition(table: str) -> str:
    return f"{table}_default"


def month_partitions(table: str) -> list[date]:
    """The months `table` has a partition for, oldest first (the default one left out)."""
    prefix = f"{table}_p"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [table],
        )
        names = [row[0] for row in cursor.fetchall()]
    months = []
    for name in names:
        if name.startswith(prefix):
            year, month = name[len(prefix) :].split("_")
            months.append(date(int(year), int(month), 1))
    return sorted(months)


def history_months() -> list[date]:
    """Months with a partition in every history table, oldest first."""
    sets = [set(month_partitions(t.table)) for t in HISTORY_TABLES]
    return sorted(set.intersection(*sets))


def default_partition_rows() -> dict[str, int]:
    """{table: rows in its default partition}: non-zero means a month was missing."""
    counts = {}
    with connection.cursor() as cursor:
        for t in HISTORY_TABLES:
            cursor.execute(f"SELECT count(*) FROM {default_partition(t.table)}")
            counts[t.table] = cursor.fetchone()[0]
    return counts


def month_partition_create(
    t: HistoryTable, month: date, *, existing: Collection[date] | None = None
) -> bool:
    """Create `month`'s partition of one table if it is missing; returns whether it was.
    `existing`: the table's months already read from the catalog (else read here).

    Rows of that month waiting in the default partition move into it in the same
    transaction (PostgreSQL refuses a new partition whose rows sit in the default one).
    """
    if month in (month_partitions(t.table) if existing is None else existing):
        return False
    start, end = month_bounds(month)
    name, default = partition_name(t.table, month), default_partition(t.table)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {default} WHERE {t.key} >= %s AND {t.key} < %s)",
            [start, end],
        )
        (strays,) = cursor.fetchone()
        if strays:
            cursor.execute(f"ALTER TABLE {t.table} DETACH PARTITION {default}")
        # DDL takes no bound parameters: the bounds are literals we made ourselves.
        cursor.execute(
            f"CREATE TABLE {name} PARTITION OF {t.table} "
            f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
        )
        if strays:
            cursor.execute(
                f"WITH moved AS (DELETE FROM {default} WHERE {t.key} >= %s AND {t.key} < %s "
                f"RETURNING *) INSERT INTO {t.table} SELECT * FROM moved",
                [start, end],
            )
            cursor.execute(f"ALTER TABLE {t.table} ATTACH PARTITION {default} DEFAULT")
            logger.warning("moved %s rows of %s out of %s", cursor.rowcount, month, default)
    return True


def partitions_ensure(*, now: datetime | None = None, ahead: int | None = None) -> list[str]:
    """Create the partitions history needs: this month and NOTIFY_PARTITIONS_AHEAD months
    ahead, and any month that has rows in a default partition. Idempotent; returns the
    partitions it created."""
    now = now or timezone.now()
    ahead = settings.NOTIFY_PARTITIONS_AHEAD if ahead is None else ahead
    current = month_of(now)
    wanted = {month_add(current, n) for n in range(ahead + 1)}
    created = []
    for t in HISTORY_TABLES:
        months = set(wanted)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT DISTINCT date_trunc('month', {t.key} AT TIME ZONE 'UTC')::date "
                f"FROM {default_partition(t.table)}"
            )
            months |= {row[0] for row in cursor.fetchall()}
        existing = set(month_partitions(t.table))  # one catalog read per table
        for month in sorted(months):
            if month_partition_create(t, month, existing=existing):
                created.append(partition_name(t.table, month))
    return created
