"""Emptying the test database after a transactional test, cheaper than Django's flush.

Django's flush TRUNCATEs every table (about 70 relations with the partitions, each
given new files) and then makes the content types and permissions again. Most tests
write to a handful of tables, so this locks them all, finds those with rows by one
probe and deletes their rows, in one transaction. Every foreign key Django makes on
PostgreSQL is checked at commit (DEFERRABLE INITIALLY DEFERRED), so the tables can go
in any order. The content types and permissions that migrate made are kept instead of
made again.
"""

from __future__ import annotations

import functools
import time

from django.db import IntegrityError, OperationalError, connections, transaction
from django.db.backends.utils import CursorWrapper

# Made by migrate's post_migrate; Django's flush would delete and make them again.
KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})
ATTEMPTS = 3  # a deadlock with a worker, or a row it wrote meanwhile, is tried again
_RETRY_PAUSE_SECONDS = 0.5


@functools.cache
def _statements(using: str, database: str) -> tuple[str, str, list[str]]:
    """The lock and the probe for `using`'s tables, and those tables: read from the
    catalogue once per test database (migrate made them; no test adds a model's table)."""
    connection = connections[using]
    quote = connection.ops.quote_name
    tables = sorted(
        set(connection.introspection.django_table_names(only_existing=True, include_views=False))
        - KEPT_TABLES
    )
    lock = f"LOCK TABLE {', '.join(quote(t) for t in tables)} IN ACCESS EXCLUSIVE MODE"
    probe = " UNION ALL ".join(f"(SELECT %s FROM {quote(table)} LIMIT 1)" for table in tables)
    return lock, probe, tables


def tables_with_rows(using: str = "default") -> list[str]:
    """The tables (but the kept ones) that have at least one row, by one probe."""
    connection = connections[using]
    _, probe, tables = _statements(using, connection.settings_dict["NAME"])
    with connection.cursor() as cursor:
        return _probe(cursor, probe, tables)


def _probe(cursor: CursorWrapper, probe: str, tables: list[str]) -> list[str]:
    cursor.execute(probe, tables)
    return [row[0] for row in cursor.fetchall()]


def database_empty(using: str = "default") -> list[str]:
    """Delete every row a test left (but the kept tables'), in one transaction; the
    tables emptied. A deadlock with a worker still finishing a task, or a row it wrote
    meanwhile, is tried again (ATTEMPTS); the worker's side is retried by the platform.

    Every table is locked first, as TRUNCATE locks them: a worker still finishing a task
    waits until the rows are gone (and then finds its own rows' parents gone), instead of
    writing a row between two DELETEs whose parent the second one removes."""
    connection = connections[using]
    statements = _statements(using, connection.settings_dict["NAME"])
    for _ in range(ATTEMPTS - 1):
        try:
            return _empty_once(using, *statements)
        except (OperationalError, IntegrityError):
            time.sleep(_RETRY_PAUSE_SECONDS)
    return _empty_once(using, *statements)


def _empty_once(using: str, lock: str, probe: str, tables: list[str]) -> list[str]:
    connection = connections[using]
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(lock)
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        with_rows = _probe(cursor, probe, tables)
        for table in with_rows:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")
    return with_rows
