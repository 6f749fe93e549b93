# The latency histogram's partial index covers `reached` as well as `delivered` (an email
# an ESP reported delivered, an SMS with a DELIVRD receipt moves on to `reached`): built
# without holding writes to deliveries_delivery for the length of the build.
#
# The table is range-partitioned by month (history 0002), and PostgreSQL builds no index
# CONCURRENTLY on a partitioned table, so AddIndexConcurrently cannot be used. Instead, the
# documented way for partitioned tables:
#   1. CREATE INDEX ... ON ONLY the parent: an empty, invalid index on the parent alone
#      (a catalog change: a brief SHARE lock, no build);
#   2. per partition, CREATE INDEX CONCURRENTLY (writes go on during each build), then
#      ALTER INDEX parent ATTACH PARTITION; once every partition's index is attached the
#      parent's becomes valid, and partitions created later get it as any other index.
# The old index is then dropped. DROP INDEX CONCURRENTLY is refused on a partitioned index
# too, so that DROP takes an ACCESS EXCLUSIVE lock on the table and its partitions, for a
# catalog change and file unlinks only: it, step 1 and each ATTACH run under a short
# lock_timeout and are tried again, so they never queue the senders' writes behind a long
# transaction.
# Non-atomic (CONCURRENTLY cannot run in a transaction); each step is safe to run again.
# Self-contained on purpose: it must run the same however the app's code changes later.

import time

from django.db import OperationalError, migrations, models, transaction

TABLE = "deliveries_delivery"
NEW = "delivery_success_recent"
OLD = "delivery_delivered_recent"
NEW_WHERE = "status IN ('delivered', 'reached')"
OLD_WHERE = "status = 'delivered'"
LOCK_TIMEOUT = "2s"
LOCK_TRIES = 30


def _briefly(connection, sql: str) -> None:
    """Run a statement that takes a strong lock for a moment, giving up on the lock after
    LOCK_TIMEOUT (and trying again) rather than queueing writes behind a long wait."""
    for attempt in range(LOCK_TRIES):
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                cursor.execute(sql)
            return
        except OperationalError:
            if attempt == LOCK_TRIES - 1:
                raise
            time.sleep(1)


def _index_valid(cursor, name: str) -> bool | None:
    """Whether the index exists and is valid; None when it does not exist."""
    cursor.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace",
        [name],
    )
    row = cursor.fetchone()
    return None if row is None else row[0]


def _partitioned(cursor) -> bool:
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [TABLE])
    return cursor.fetchone()[0] == "p"


def _partitions(cursor, name: str) -> list[str]:
    """The partitions of the table with no index attached to the parent's `name` yet."""
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %s::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_inherits x JOIN pg_index pi ON pi.indexrelid = "
        "x.inhrelid WHERE x.inhparent = %s::regclass AND pi.indrelid = c.oid) "
        "ORDER BY c.relname",
        [TABLE, name],
    )
    return [row[0] for row in cursor.fetchall()]


def _build(connection, name: str, where: str, dropping: str) -> None:
    """Build index `name` on the table (concurrently, partition by partition), then drop
    `dropping`."""
    with connection.cursor() as cursor:
        if not _partitioned(cursor):  # not partitioned (yet): one concurrent build
            if _index_valid(cursor, name) is False:  # a build that failed half-way
                cursor.execute(f"DROP INDEX CONCURRENTLY {name}")
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {TABLE} (finished_at) "
                f"WHERE {where}"
            )
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {dropping}")
            return
        if _index_valid(cursor, name) is None:
            _briefly(
                connection,
                f"CREATE INDEX {name} ON ONLY {TABLE} (finished_at) WHERE {where}",
            )
        for partition in _partitions(cursor, name):
            part_index = f"{partition}_{name}"[:63]
            if _index_valid(cursor, part_index) is False:
                cursor.execute(f"DROP INDEX CONCURRENTLY {part_index}")
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {part_index} ON {partition} "
                f"(finished_at) WHERE {where}"
            )
            _briefly(connection, f"ALTER INDEX {name} ATTACH PARTITION {part_index}")
        if not _index_valid(cursor, name):
            raise RuntimeError(f"{name} is not valid after every partition was attached")
        if _index_valid(cursor, dropping) is not None:
            _briefly(connection, f"DROP INDEX IF EXISTS {dropping}")


def forwards(apps, schema_editor) -> None:
    _build(schema_editor.connection, NEW, NEW_WHERE, OLD)


def backwards(apps, schema_editor) -> None:
    _build(schema_editor.connection, OLD, OLD_WHERE, NEW)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('deliveries', '0022_reason_seen_live'),
        ('notify', '0016_digest_windows_inapp'),
        ('templates_admin', '0002_publish_permission_and_log'),
        # Partitioned by then, so there is one path to take.
        ('history', '0002_partition_history'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(
                    model_name='delivery',
                    name='delivery_delivered_recent',
                ),
                migrations.AddIndex(
                    model_name='delivery',
                    index=models.Index(condition=models.Q(('status__in', ['delivered', 'reached'])), fields=['finished_at'], name='delivery_success_recent'),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
