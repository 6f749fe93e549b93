"""The shipper: events out of PostgreSQL into the store, each exactly once.

A batch is one PostgreSQL transaction: the oldest NOTIFY_ANALYTICS_BATCH events are
deleted and, in the same statement, copied out as CSV (`COPY (DELETE … RETURNING …)`),
streamed into the store as one INSERT while the COPY runs, and the deletion committed
after the store took them. Killed before the commit, the rows come back in PostgreSQL
while the store may hold them already: so at start, and after any failure,
`shipped_reconcile` deletes from PostgreSQL the queued events the store already has
(by event id) before shipping again. Nothing is lost (a row leaves PostgreSQL only
after the store has it) and nothing is doubled (a row the store has is never sent again).

Erasures are applied here too, in order with the batches: this process is the store's
only writer.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager

from django.conf import settings
from django.db import connection, transaction

from analytics.models import AnalyticsErasure, AnalyticsEvent, EventKind
from analytics.store.schema import EVENT_COLUMNS, EVENTS

logger = logging.getLogger(__name__)

QUEUE = AnalyticsEvent._meta.db_table

# The batch is every visible event up to the id of the NOTIFY_ANALYTICS_BATCH-th: a
# range, deleted without a lock taken first (twice as fast as `id IN (…)`). An event
# with a lower id whose transaction has not committed yet is invisible here, so it is
# neither deleted nor shipped, and goes with a later batch. A second shipper running the
# same DELETE waits on these rows and then finds them gone: nothing ships twice.
_BATCH_DELETE = f"""
    DELETE FROM {QUEUE}
     WHERE id <= (SELECT max(id) FROM (SELECT id FROM {QUEUE} ORDER BY id LIMIT %(limit)s) b)
    RETURNING *
"""
# A queued `delivered` row stands for its try's `sent` too (every delivered comes from a
# try: analytics/events.py writes one row where the store counts two). So a queued row
# is event 2 * id + 1 in the store, and that `sent` is 2 * id, just before it. An
# `accepted` row with a pair (the route's: a notification's second delivery) has that
# delivery's `accepted` as event 2 * id: a row is never both.


def store_rows_sql(source: str) -> str:
    """The store's rows of the queued rows `source` yields (a statement's text, with the
    rows as `gone`), as CSV in EVENT_COLUMNS' order.

    Times in UTC as PostgreSQL writes a timestamp (ISO, microseconds): the store keeps
    the milliseconds and drops the rest, as `to_char(…, 'MS')` did, for a quarter less
    of the COPY's time. A missing campaign is 0 and a missing latency -1, as the store's
    columns have no NULLs."""
    no_notification = "'00000000-0000-0000-0000-000000000000'::uuid"

    def row(channel: str, provider: str, reason: str, delivery: str) -> str:
        """The columns from occurred_at to person, for one of a queued row's events."""
        return f"""occurred_at AT TIME ZONE 'UTC', producer_id, COALESCE(campaign_id, 0),
                   category, {channel}, {provider}, {reason}, COALESCE({delivery}, 0),
                   COALESCE(notification_id, {no_notification}), person"""

    own = row("channel", "provider", "reason", "delivery_id")
    sent = row("channel", "provider", "''", "delivery_id")
    pair = row("pair_channel", "pair_provider", "''", "pair_delivery_id")
    return f"""
    COPY (
        WITH gone AS ({source})
        SELECT id * 2 + 1, kind, {own}, COALESCE(latency_ms, -1) FROM gone
        UNION ALL
        SELECT id * 2, '{EventKind.SENT.value}', {sent}, -1
          FROM gone WHERE kind = '{EventKind.DELIVERED.value}'
        UNION ALL
        SELECT id * 2, kind, {pair}, -1 FROM gone WHERE pair_delivery_id IS NOT NULL
    ) TO STDOUT WITH (FORMAT csv)
    """


_COPY_SQL = store_rows_sql(_BATCH_DELETE)


def batch_ship(*, store, limit: int | None = None) -> int:
    """Ship one batch of the oldest events; how many the store took (0: none waiting).

    The COPY's bytes go into the store's INSERT block by block as PostgreSQL sends them,
    so the store parses the first rows while PostgreSQL still deletes the last ones (a
    third faster than taking the whole batch first). The store has every row when the INSERT
    finishes, which is when the COPY has ended; the deletion commits after that."""
    limit = limit or settings.NOTIFY_ANALYTICS_BATCH
    with transaction.atomic(), connection.cursor() as cursor:
        # psycopg's own cursor: Django's debug wrapper (DJANGO_DEBUG, as under `make
        # run`) has a copy() that takes no parameters.
        with cursor.cursor.copy(_COPY_SQL, {"limit": limit}) as copy:
            chunks = _blocks(copy)
            first = next(chunks, None)
            if first is not None:  # none waiting: the store is not asked
                store.insert_csv(EVENTS, EVENT_COLUMNS, itertools.chain([first], chunks))
        shipped = cursor.rowcount
    return max(shipped, 0)


# The COPY yields one row at a time, and every append to the store's INSERT costs a few
# microseconds of its own: whole blocks of rows, a row's append cost shared by hundreds.
COPY_BLOCK_BYTES = 256 * 1024


def _blocks(chunks: Iterable[memoryview]) -> Iterator[bytes]:
    """The COPY's rows joined into blocks of about COPY_BLOCK_BYTES (none empty)."""
    block = bytearray()
    for chunk in chunks:
        block += chunk
        if len(block) >= COPY_BLOCK_BYTES:
            yield bytes(block)
            block.clear()
    if block:
        yield bytes(block)


def shipped_reconcile(*, store) -> int:
    """Delete from PostgreSQL the queued events the store already has (a batch whose
    commit a killed or failed shipper never made); how many."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {QUEUE} ORDER BY id LIMIT 1")
        first = cursor.fetchone()
    if first is None:
        return 0
    have = store.query(
        f"SELECT DISTINCT intDiv(event_id, 2) FROM {EVENTS} WHERE event_id >= {{first:UInt64}}",
        {"first": first[0] * 2},
    )
    if not have:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {QUEUE} WHERE id = ANY(%s)", [[int(r[0]) for r in have]])
        removed = cursor.rowcount
    if removed:
        logger.warning("analytics: %s events were in the store already, not shipped again", removed)
    return removed


def erasures_apply(*, store) -> int:
    """Delete erased people's rows from the store, then their erasure rows; how many."""
    pending = list(AnalyticsErasure.objects.order_by("pk").values_list("pk", "person")[:100])
    for pk, person in pending:
        store.command(
            f"ALTER TABLE {EVENTS} DELETE WHERE person = {{person:String}} "
            "SETTINGS mutations_sync = 1",
            {"person": person},
        )
        AnalyticsErasure.objects.filter(pk=pk).delete()
    return len(pending)


def ship_forever(
    *,
    store,
    should_stop: Callable[[], bool],
    sleep: Callable[[float], None],
    turn: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> None:
    """Ship until `should_stop()`: full batches back to back while a backlog waits,
    erasures between them, and a pause of NOTIFY_ANALYTICS_POLL_INTERVAL after a batch
    that did not fill (the queue empty, or events trickling in as a pipeline writes
    them). A failure (the database or the store away) is logged, and the next round
    reconciles first. Each round runs inside `turn()`: the process's command waits there
    while login codes are in flight, as campaign work does.

    The pause is what keeps the store's inserts few: every INSERT makes a part in the
    events table and in each rollup, and shipping whatever a few rounds had written, as
    fast as the last insert ended, spent about a sixth of a CPU on a campaign's drain."""
    suspect = True  # at start: the last run may have died between insert and commit
    while not should_stop():
        try:
            with turn():
                if suspect:
                    shipped_reconcile(store=store)
                    suspect = False
                shipped = batch_ship(store=store)
                erasures_apply(store=store)
        except Exception:
            logger.exception("analytics: shipping failed; reconciling and trying again")
            suspect = True
            connection.close()
            sleep(settings.NOTIFY_ANALYTICS_POLL_INTERVAL)
            continue
        if shipped < settings.NOTIFY_ANALYTICS_BATCH:
            sleep(settings.NOTIFY_ANALYTICS_POLL_INTERVAL)
