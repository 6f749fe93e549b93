"""Intake's metrics rollup: notifications accepted per category, all time, that a scrape
reads without touching history.

A notification is written with `counted` false. The fold, run by beat, takes
notifications not counted yet (the partial index `notif_count_pending`), adds them to
`AcceptedCount` and marks them counted — one statement per batch. A scrape reads the
rollup plus the notifications not counted yet, in one statement. Intake writes nothing
extra: the column's default and one entry in the pending index.

Erasure folds the person's notifications before deleting them (`accepted_counts_settle`)
and retention drops months long folded, so the counter never goes down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from notify.models import AcceptedCount, Category, Notification
from pgarrays import array_literal

NOTIFICATIONS = Notification._meta.db_table
COUNTS = AcceptedCount._meta.db_table
# The predicate of the partial index `notif_count_pending`, as Django writes it.
PENDING = 'NOT "counted"'

# Planner settings for the transaction (`true`: local to it); see pending_by_index.
_INDEX_ONLY_PLANS = """
    SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
           set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)
"""
# Adds `changed` (notifications just marked counted) to the rollup, in key order, so
# concurrent folds never deadlock.
_UPSERT = f"""
    INSERT INTO {COUNTS} AS c (category_id, count)
    SELECT category_id, count(*) FROM changed GROUP BY category_id ORDER BY category_id
        ON CONFLICT (category_id) DO UPDATE SET count = c.count + EXCLUDED.count
"""


@contextmanager
def pending_by_index() -> Iterator[CursorWrapper]:
    """A cursor in a transaction whose reads of rows not counted yet go through their
    partial index, as they must for a scrape or a fold to cost what changed, not what
    exists. (The deliveries' rollup uses it too.)

    The planner's guess of how many rows are pending can be far off: for deliveries it
    compares two columns, which it cannot estimate (it guesses a third of the table),
    and for notifications the statistics may predate the last fold. It would then scan
    every partition, in parallel. So, for this transaction only: a plain index scan —
    no sequential or bitmap scans (a plain one also marks the entries of rows folded
    since as dead, so the next reads skip them even before vacuum comes), and none of
    what a plan guessed that large brings (parallel workers, JIT compilation), each of
    which costs more than reading the index.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_INDEX_ONLY_PLANS)
        yield cursor


def fold_in_batches(
    fold_batch: Callable[[int], int], *, limit: int | None = None, batch: int | None = None
) -> int:
    """Run `fold_batch(size)` until it folds nothing or `limit` (NOTIFY_METRICS_FOLD_LIMIT)
    rows went, in batches of `batch` (NOTIFY_METRICS_FOLD_BATCH); returns how many. A run
    stays short even when a migration left every row to count: the next run goes on."""
    limit = settings.NOTIFY_METRICS_FOLD_LIMIT if limit is None else limit
    batch = settings.NOTIFY_METRICS_FOLD_BATCH if batch is None else batch
    folded = 0
    while folded < limit:
        taken = fold_batch(min(batch, limit - folded))
        folded += taken
        if taken == 0:
            break
    return folded


def accepted_counts_fold(*, limit: int | None = None, batch: int | None = None) -> int:
    """Fold notifications not counted yet into the rollup; returns how many."""
    return fold_in_batches(_fold_batch, limit=limit, batch=batch)


def _fold_batch(size: int) -> int:
    """One statement: lock up to `size` uncounted notifications, count them, mark them.

    Rows routing holds are skipped (SKIP LOCKED); the UPDATE joins on (id, created_at) so
    each row is found in its own partition.
    """
    with pending_by_index() as cursor:
        cursor.execute(
            f"""
            WITH taken AS (
                SELECT id, created_at FROM {NOTIFICATIONS}
                 WHERE {PENDING}
                 LIMIT %(size)s
                   FOR UPDATE SKIP LOCKED
            ), changed AS (
                UPDATE {NOTIFICATIONS} n SET counted = true
                  FROM taken t
                 WHERE n.id = t.id AND n.created_at = t.created_at
                RETURNING n.category_id
            ), upserted AS ({_UPSERT})
            SELECT count(*) FROM changed
            """,
            {"size": size},
        )
        return cursor.fetchone()[0]


def accepted_counts_settle(*, notification_ids: Sequence[object]) -> None:
    """Fold these notifications now, before they are deleted (erasure), so the counter
    keeps them. Call it in the transaction that deletes them."""
    if not notification_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH changed AS (
                UPDATE {NOTIFICATIONS} SET counted = true
                 WHERE id = ANY(%(ids)s::uuid[]) AND {PENDING}
                RETURNING category_id
            )
            {_UPSERT}
            """,
            {"ids": array_literal(notification_ids)},
        )


def accepted_counts() -> list[tuple[str, str, int]]:
    """(category key, queue, notifications accepted), exact now: the rollup plus the
    notifications not counted yet, in one statement. Labels are the category's current
    key and queue."""
    with pending_by_index() as cursor:
        cursor.execute(
            f"""
            SELECT k.key, k.queue, sum(c.n)::bigint
              FROM (SELECT category_id, count AS n FROM {COUNTS}
                    UNION ALL
                    SELECT category_id, count(*) FROM {NOTIFICATIONS}
                     WHERE {PENDING} GROUP BY category_id) AS c
              JOIN {Category._meta.db_table} k ON k.id = c.category_id
             GROUP BY k.key, k.queue
            HAVING sum(c.n) > 0
            """
        )
        return [(key, queue, n) for key, queue, n in cursor.fetchall()]
