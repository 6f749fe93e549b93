"""Django's PostgreSQL DatabaseWrapper, warming each new pooled connection."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base

from pgarrays.warm import connection_warm


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's, but a connection the pool opens plans the hot statements before the
    pool hands it out: Django's pool calls this set-up once per connection it opens, in
    the pool's own thread, so no request or task waits for it (except one that finds no
    connection open yet, at a process's start)."""

    def _configure_connection(self, connection: Any) -> bool:
        commit = super()._configure_connection(connection)
        connection_warm(connection)
        return commit
