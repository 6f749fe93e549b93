"""The cursor every pooled connection uses when parameters are bound on the server.

psycopg prepares a statement once a connection has run it DATABASE_PREPARE_THRESHOLD
times, and until then PostgreSQL plans it at every run. For the hot statements
(`planned_once`) those runs are wasted: each of them is planned anyway, some 1.5 to 5 ms of
PostgreSQL's CPU apiece over the partitioned tables, and a worker's ten pooled
connections each paid it for every hot statement before serving from a kept plan. This
cursor prepares a `PlannedOnce` statement at its first run on a connection, so that
PostgreSQL's own count (five plans for the values at hand, then the generic one for
good) starts at once. Any other statement keeps the threshold: a statement run once or
twice is not worth a name on the server.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.base import ServerBindingCursor

from pgarrays import PlannedOnce


class HotStatementCursor(ServerBindingCursor):
    """Django's server-binding cursor, preparing `PlannedOnce` statements at first run."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, **kwargs: Any
    ) -> HotStatementCursor:
        """Run `query`; a hot statement is prepared on this connection if not yet."""
        if prepare is None and type(query) is PlannedOnce:
            prepare = True
        return super().execute(query, params, prepare=prepare, **kwargs)
