"""Hot statements planned before a connection serves its first task.

psycopg prepares a statement on a connection, and PostgreSQL plans a prepared statement
afresh at each of its first five runs there before it keeps the generic plan (which
`planned_once` lets it keep). Each of those plans covers every partition with its
indexes: some 3 ms for the sender's claim. A new pooled connection paid them on its first
real work, under whatever load there was. Under a campaign, the first login codes of a
fresh worker waited on those plans (S3's slowest codes were a wave's first), and a fresh
worker's first second of a burst spent as long planning as running (S2).

So each hot statement registers itself here (`warmed`), and every new connection runs
each of them `WARM_RUNS` times with empty arrays before the pool hands it out
(`connection_warm`, from the database backend's connection set-up, pgarrays.backend):
prepared, planned, generic from then on. Empty arrays change no row; the connection is
in autocommit, so nothing is rolled back (a rollback would make psycopg drop every
statement it prepared). A statement psycopg keys differently at its real run (another
parameter type) would simply be prepared again: the test of this module runs each
registered statement's real caller after a warm-up and checks that nothing was.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import psycopg

from pgarrays import ARRAY_SUBQUERY

logger = logging.getLogger(__name__)

# PostgreSQL's plan cache plans a prepared statement for its values at each of the first
# five runs, then keeps the generic plan when it is not dearer: the sixth run is generic.
WARM_RUNS = 6
# A table every registered statement needs: missing (a database not migrated yet, the
# maintenance database a test run creates its own from), nothing is warmed.
PROBE_TABLE = "deliveries_delivery"
_PARAMETER = re.compile(r"%\((\w+)\)s")
# The sample a timestamp parameter is warmed with (its type is what counts).
WARM_TIME = datetime(2000, 1, 1, tzinfo=UTC)

_statements: list[tuple[Callable[[], str], dict[str, Any]]] = []


def warmed(sql: str | Callable[[], str], **scalars: Any) -> Any:
    """Register a hot statement (or a function that builds it, called at warm-up) to be
    planned on every new connection; returns `sql` as given.

    Its array parameters (`planned_once`'s `(SELECT %(x)s::type[])`) are bound as empty
    arrays; every other parameter needs a sample value in `scalars`, of the Python type
    its callers bind (psycopg keys a prepared statement by its parameters' types)."""
    _statements.append((sql if callable(sql) else (lambda: sql), scalars))
    return sql


def warm_params(sql: str, scalars: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a warm-up binds: `{}` for each array, the samples for the rest.
    Raises ValueError naming a parameter that is neither."""
    arrays = set(ARRAY_SUBQUERY.findall(sql))
    params: dict[str, Any] = {}
    for name in set(_PARAMETER.findall(sql)):
        if name in arrays:
            params[name] = "{}"
        elif name in scalars:
            params[name] = scalars[name]
        else:
            raise ValueError(f"warm-up: no sample value for %({name})s")
    return params


def connection_warm(connection: psycopg.Connection) -> int:
    """Prepare and plan every registered statement on `connection` (a psycopg
    connection in autocommit, not yet serving); returns how many were warmed. A
    statement that fails is logged and left to be planned at its first real run."""
    if not _statements or connection.autocommit is False:
        return 0
    try:
        exists = connection.execute("SELECT to_regclass(%s)", [PROBE_TABLE]).fetchone()
    except psycopg.Error:
        return 0
    if not exists or exists[0] is None:
        return 0
    return statements_warm(connection)


def statements_warm(connection: psycopg.Connection) -> int:
    """Run every registered statement `WARM_RUNS` times on `connection`, prepared;
    returns how many were warmed (`connection_warm` without its checks)."""
    count = 0
    for build, scalars in _statements:
        sql = build()
        try:
            params = warm_params(sql, scalars)
            for _ in range(WARM_RUNS):
                connection.execute(sql, params, prepare=True)
        except (psycopg.Error, ValueError):
            logger.warning("warm-up of a hot statement failed", exc_info=True)
            continue
        count += 1
    return count
