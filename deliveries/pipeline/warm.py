"""A worker's pooled PostgreSQL connections, warmed before it takes its first message.

PostgreSQL keeps a prepared statement's plan per connection, and only after planning it
for the values at hand five times (pgarrays.cursor prepares the hot statements at their
first run). The route's and the sender's statements take some 1 to 5 ms of PostgreSQL's
CPU to plan over the partitioned tables, and about 7 ms on a connection's first use of
a table. So a worker that had just started planned them on each of its connections as
its first few hundred events went through: half of PostgreSQL's CPU in a 1,000-event
drain went to planning, while both CPUs were busy. Instead, as the worker starts, each
of the connections its sender threads will use runs each hot statement on an empty
batch (which reads and writes no row) until the plan is the generic one for good; its
events then find the statements planned.

The pool closes a connection left idle for ten minutes beyond its minimum size and
replaces each after an hour (psycopg's `max_idle` and `max_lifetime`); a connection
opened later warms through its first runs, as every connection did before.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from analytics.events import riding_sql
from deliveries.changes import rides_ctes
from deliveries.pipeline.claim import CLAIM_SQL, LOAD_SQL
from deliveries.pipeline.record_sql import RECORD_SQL, record_sql
from deliveries.pipeline.route_lock import LOCK_SQL
from deliveries.pipeline.route_write import ROUTED_SQL, route_write_sql

logger = logging.getLogger(__name__)

# Runs of each statement: the first prepares it, PostgreSQL plans the first five for
# their values and makes the generic plan at the sixth, then keeps it.
WARM_RUNS = 6
# The statements' scalar parameters that are instants (every other one is an array).
_INSTANTS = frozenset({"now", "waited_enough", "analytics_now"})
_PARAMETER = re.compile(r"%\((\w+)\)s")
_ARRAY = re.compile(r"\(SELECT %\((\w+)\)s::[\w (),]+?\[\]\)")


def hot_statements() -> list[str]:
    """The statements every routed batch and every send round runs, in the texts they
    run as (the record with the analytics events riding when analytics is on). The
    others a batch runs (the gate's read, the feed's insert, the events') plan in well
    under a millisecond and are left to warm as they run."""
    statements = [LOCK_SQL, route_write_sql(), ROUTED_SQL, LOAD_SQL, CLAIM_SQL, RECORD_SQL]
    if settings.NOTIFY_ANALYTICS_ENABLED:
        statements.append(record_sql(rides_ctes([riding_sql("outcome")])))
    return statements


def empty_batch(sql: str, now: datetime) -> dict[str, Any]:
    """Parameters that make `sql` a batch of nothing: every array empty, every instant
    `now`. Each is of the type a real batch binds (a text literal, a datetime), so the
    driver finds the statement it prepared here when a real batch runs it."""
    arrays = set(_ARRAY.findall(sql))
    params: dict[str, Any] = {}
    for name in set(_PARAMETER.findall(sql)):
        if name in arrays:
            params[name] = "{}"
        elif name in _INSTANTS:
            params[name] = now
        else:
            raise ValueError(f"no empty value for the parameter {name!r} of a hot statement")
    return params


def statements_warm(statements: list[str] | None = None) -> None:
    """Run each hot statement on an empty batch WARM_RUNS times on this thread's
    connection, outside any transaction: nothing is read or written."""
    now = timezone.now()
    with connection.cursor() as cursor:
        for sql in statements if statements is not None else hot_statements():
            params = empty_batch(sql, now)
            for _ in range(WARM_RUNS):
                cursor.execute(sql, params)


def connections_warm(count: int) -> float:
    """Warm `count` distinct pooled connections at once, one thread each (each holds its
    connection until all are warm, so no two warm the same one); returns the seconds it
    took. A connection that fails to warm is logged and given back: the worker starts
    anyway, and its statements plan as they run."""
    statements = hot_statements()
    started = time.monotonic()
    all_held = threading.Barrier(count)

    def warm_one() -> None:
        try:
            statements_warm(statements)
        except Exception:
            logger.exception("a PostgreSQL connection was not warmed; it plans as it runs")
        finally:
            with contextlib.suppress(threading.BrokenBarrierError):
                all_held.wait(timeout=WARM_WAIT_SECONDS)
            connection.close()  # back to the pool, warm

    threads = [_thread(warm_one, number) for number in range(count)]
    for thread in threads:
        thread.join()
    return time.monotonic() - started


# How long a warmed connection waits for the others before it goes back to the pool
# (a pool that cannot open them all at once: the rest warm as they run).
WARM_WAIT_SECONDS = 30.0


def _thread(target: Callable[[], None], number: int) -> threading.Thread:
    thread = threading.Thread(target=target, name=f"pg-warm-{number}", daemon=True)
    thread.start()
    return thread
