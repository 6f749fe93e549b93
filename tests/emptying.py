"""Emptying the test database after a transactional test, cheaper than Django's flush.

Django's flush TRUNCATEs every table (about 70 relations with the partitions, each
given new files) and then makes the content types and permissions again. Most tests
write to a handful of tables, so this deletes the rows of just those, found by one
probe, in one transaction. Every foreign key Django makes on PostgreSQL is checked at
commit (DEFERRABLE INITIALLY DEFERRED), so the tables can go in any order. The content
types and permissions that migrate made are kept instead of made again.
"""

from __future__ import annotations

from django.db import connections, transaction

# Made by migrate's post_migrate; Django's flush would delete and make them again.
KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})


def tables_with_rows(using: str = "default") -> list[str]:
    """The project's tables that hold at least one row, in one statement."""
    connection = connections[using]
    tables = sorted(
        set(connection.introspection.django_table_names(only_existing=True, include_views=False))
        - KEPT_TABLES
    )
    probe = " UNION ALL ".join(
        f"(SELECT %s FROM {connection.ops.quote_name(table)} LIMIT 1)" for table in tables
    )
    with connection.cursor() as cursor:
        cursor.execute(probe, tables)
        return [row[0] for row in cursor.fetchall()]


def database_empty(using: str = "default") -> list[str]:
    """Delete every row a test left (but the kept tables'), in one transaction; the
    tables emptied."""
    connection = connections[using]
    tables = tables_with_rows(using)
    if tables:
        with transaction.atomic(using=using), connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            for table in tables:
                cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")
    return tables
