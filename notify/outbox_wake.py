"""Waking the outbox relays, at a commit or after it.

Every insert into the outbox wakes the relays: a statement-level trigger sends a NOTIFY
on WAKE_CHANNEL, which PostgreSQL delivers when the inserting transaction commits. But
PostgreSQL serializes the commits of all transactions that sent a NOTIFY, so a long
commit of one holds up the others' — and a login code's intake is one of them. A
writer whose transaction runs at a low priority (a campaign's fan-out, whose backend
the scheduler may preempt at any moment) calls `outbox_wake_after_commit` inside it:
its inserts send nothing, and one NOTIFY goes out right after the commit, in a
transaction of its own at the usual priority, which holds that lock for a moment only.
"""

from __future__ import annotations

import psycopg
from django.db import connection, transaction

from flow.backend_priority import usual_priority

WAKE_CHANNEL = "notify_outbox"  # what the outbox's insert trigger notifies (migration 0004)
# The transaction-local setting the trigger reads (migration 0023).
_WAKE_SETTING = "notify.outbox_wake"


def outbox_wake_after_commit() -> None:
    """In a transaction about to insert outbox rows: the trigger sends no NOTIFY for
    them, and the relays are woken once it commits (not at all if it rolls back). One
    statement now, one after the commit.

    A wake-up that fails after the commit is logged, not raised: the rows are safe, the
    relays find them at their next poll (NOTIFY_OUTBOX_POLL_INTERVAL), and the writer's
    own later callbacks (a fan-out's next batch) still run."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, 'after_commit', true)", [_WAKE_SETTING])
    transaction.on_commit(outbox_wake, robust=True)


def outbox_wake() -> None:
    """Wake the outbox relays now, in a transaction of its own (autocommit)."""
    with usual_priority(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [WAKE_CHANNEL])


def wake_listener() -> psycopg.Connection:
    """A dedicated autocommit connection that LISTENs for the relays' wake-ups (the
    relay's own; it is not borrowed from the pool, since it waits for hours)."""
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    listener = psycopg.connect(**params, autocommit=True)
    listener.execute(f"LISTEN {WAKE_CHANNEL}")
    return listener
