"""The deliveries' metrics rollup: counts per (channel, status, tries) that a scrape reads
without touching history.

Each delivery remembers what the rollup last counted it as (`counted_status`,
`counted_attempts`). The fold, run by beat, takes deliveries whose status or attempts
changed since (the partial index `delivery_count_pending`), moves each one's count from
what it was counted as to what it is now, and marks it counted — one statement per
batch. A scrape reads the rollup plus the same moves of the deliveries not folded yet,
in one statement, so it is exact at any moment and costs one fold interval of changes.

The sender, routing and intake write nothing extra: a status update only lands in the
pending index, and only the fold (or an erasure) writes the rollup rows. The fold skips
rows somebody holds (SKIP LOCKED) and takes its counter rows in key order, so folds may
overlap.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from deliveries.models import FINAL_STATUSES, Delivery, DeliveryCount
from notify.counts import fold_in_batches, pending_by_index

DELIVERIES = Delivery._meta.db_table
COUNTS = DeliveryCount._meta.db_table
# The predicate of the partial index `delivery_count_pending`, as Django writes it: the
# planner uses the index only for a WHERE that implies it (and see pending_by_index).
PENDING = 'NOT ("status" = ("counted_status")) OR NOT ("attempts" = ("counted_attempts"))'
# Tries as the rollup keeps them: 0 never tried, 1 first try, 2 more than one.
MAX_TRIES = 2

# Each (channel, status, tries) with the number of deliveries to add there, from the CTE
# `changed` (deliveries with their counted_* and current columns): +1 where a delivery is
# now, -1 where it was counted (nothing for one never counted).
_MOVES = f"""
    SELECT r.channel, m.status, m.tries, sum(m.n) AS n
      FROM changed r
     CROSS JOIN LATERAL (VALUES
           (r.status, LEAST(r.attempts, {MAX_TRIES}), 1),
           (r.counted_status, LEAST(r.counted_attempts, {MAX_TRIES}), -1)
     ) AS m(status, tries, n)
     WHERE m.status <> ''
     GROUP BY r.channel, m.status, m.tries
"""
# Adds `moves` to the rollup; in key order, so concurrent folds never deadlock.
_UPSERT = f"""
    INSERT INTO {COUNTS} AS c (channel, status, tries, count)
    SELECT channel, status, tries, n FROM moves WHERE n <> 0
     ORDER BY channel, status, tries
        ON CONFLICT (channel, status, tries) DO UPDATE SET count = c.count + EXCLUDED.count
"""


def delivery_counts_fold(*, limit: int | None = None, batch: int | None = None) -> int:
    """Fold deliveries changed since they were last counted into the rollup; returns how
    many were folded (at most `limit`, see fold_in_batches)."""
    return fold_in_batches(_fold_batch, limit=limit, batch=batch)


def _fold_batch(size: int) -> int:
    """One statement: lock up to `size` pending deliveries, move their counts, mark them.

    The UPDATE joins on (id, accepted_at) so each row is found in its own partition.
    """
    with pending_by_index() as cursor:
        cursor.execute(
            f"""
            WITH taken AS (
                SELECT id, accepted_at, channel, status, attempts, counted_status,
                       counted_attempts
                  FROM {DELIVERIES}
                 WHERE {PENDING}
                 LIMIT %(size)s
                   FOR UPDATE SKIP LOCKED
            ), changed AS (
                UPDATE {DELIVERIES} d
                   SET counted_status = t.status, counted_attempts = t.attempts
                  FROM taken t
                 WHERE d.id = t.id AND d.accepted_at = t.accepted_at
                RETURNING t.channel, t.status, t.attempts, t.counted_status, t.counted_attempts
            ), moves AS ({_MOVES}), upserted AS ({_UPSERT})
            SELECT count(*) FROM changed
            """,
            {"size": size},
        )
        return cursor.fetchone()[0]


def _final_or_nothing(status: str) -> str:
    """What a row leaving the database stays counted as: its status when final, else
    nothing ('', so it leaves the rollup). Needs the %(final)s parameter."""
    return f"CASE WHEN {status} = ANY(%(final)s) THEN {status} ELSE '' END"


# The counts' changes of the rows in `gone` as they leave (see _final_or_nothing).
_LEAVING = f"""
    SELECT channel, {_final_or_nothing("status")} AS status,
           attempts, counted_status, counted_attempts
      FROM gone
"""


def delivery_counts_settle(*, delivery_ids: Sequence[int]) -> None:
    """Before these deliveries are deleted (erasure): keep what they ended as and forget
    what never will end.

    A final status stays counted (its change since the last fold too); a delivery still on
    its way (queued, deferred, …) leaves the rollup, or its status would show a backlog
    forever. Call it in the transaction that deletes them: it locks them, so no fold
    counts them in between.
    """
    if not delivery_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH gone AS (
                SELECT channel, status, attempts, counted_status, counted_attempts
                  FROM {DELIVERIES}
                 WHERE id = ANY(%(ids)s)
                   FOR UPDATE
            ), changed AS ({_LEAVING})
            , moves AS ({_MOVES})
            {_UPSERT}
            """,
            {"ids": list(delivery_ids), "final": sorted(FINAL_STATUSES)},
        )


def delivery_counts_retire(*, partition: str) -> None:
    """Before a month of deliveries leaves the database (retention drops its partition):
    final ones stay counted as what they ended as, unfinished ones leave the rollup, and
    every row is marked so — a copy of the month restored later for support, and dropped
    again through here, leaves the numbers as they were. Call it in the transaction that
    drops the partition."""
    final = sorted(FINAL_STATUSES)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH gone AS (
                SELECT id, channel, status, attempts, counted_status, counted_attempts
                  FROM {partition}
                 WHERE ({PENDING}) OR NOT (status = ANY(%(final)s))
                   FOR UPDATE
            ), changed AS ({_LEAVING})
            , marked AS (
                UPDATE {partition} d
                   SET counted_attempts = d.attempts,
                       counted_status = {_final_or_nothing("d.status")}
                  FROM gone g
                 WHERE d.id = g.id
            ), moves AS ({_MOVES})
            {_UPSERT}
            """,
            {"final": final},
        )


def delivery_counts() -> dict[tuple[str, str, int], int]:
    """{(channel, status, tries): deliveries}, exact now: the rollup plus the moves of the
    deliveries not folded yet, in one statement (one snapshot, so a fold committing
    meanwhile is seen either wholly or not at all). Only keys with a count."""
    with pending_by_index() as cursor:
        cursor.execute(
            f"""
            WITH changed AS (
                SELECT channel, status, attempts, counted_status, counted_attempts
                  FROM {DELIVERIES}
                 WHERE {PENDING}
            ), moves AS ({_MOVES})
            SELECT channel, status, tries, sum(n)::bigint
              FROM (SELECT channel, status, tries, count AS n FROM {COUNTS}
                    UNION ALL
                    SELECT channel, status, tries, n FROM moves) AS c
             GROUP BY channel, status, tries
            HAVING sum(n) <> 0
            """
        )
        return {(channel, status, tries): n for channel, status, tries, n in cursor.fetchall()}
