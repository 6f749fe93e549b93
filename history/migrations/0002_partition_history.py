# Notifications, deliveries, attempts and feed entries become tables range-partitioned by
# month of their notification's created_at. Each table is rebuilt: a partitioned copy with
# the same columns, one partition per month that has rows (and the months ahead), a
# default partition as the safety net, the rows copied, then the old table dropped and
# every constraint and index recreated under its old name on the new one. The primary key
# becomes (id, month column): PostgreSQL wants the partition key in every unique index.
# Self-contained on purpose: it must run the same however the app's code changes later.

from datetime import UTC, datetime

from django.db import migrations

TABLES = [
    ("notify_notification", "created_at"),
    ("notify_feedentry", "accepted_at"),
    ("deliveries_delivery", "accepted_at"),
    ("deliveries_deliveryattempt", "accepted_at"),
]
# One month ahead, as NOTIFY_PARTITIONS_AHEAD's default: a database made with three keeps
# its later two empty months until they come (nothing creates more), which costs only
# planning time.
MONTHS_AHEAD = 1


def _month_add(month: datetime, n: int) -> datetime:
    index = month.year * 12 + month.month - 1 + n
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def _partition(cursor, table: str, key: str) -> None:
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype <> 'p' ORDER BY contype, conname",
        [table],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s::regclass "
        "AND indexrelid NOT IN (SELECT conindid FROM pg_constraint WHERE conrelid = %s::regclass)",
        [table, table],
    )
    indexes = [row[0] for row in cursor.fetchall()]
    cursor.execute(f"SELECT min({key}) FROM {table}")
    oldest = cursor.fetchone()[0]
    now = datetime.now(UTC)
    first = (oldest or now).astimezone(UTC)
    month = datetime(first.year, first.month, 1, tzinfo=UTC)
    last = _month_add(datetime(now.year, now.month, 1, tzinfo=UTC), MONTHS_AHEAD)

    new = f"{table}__partitioned"
    cursor.execute(
        f"CREATE TABLE {new} (LIKE {table} INCLUDING DEFAULTS INCLUDING IDENTITY "
        f"INCLUDING GENERATED INCLUDING STORAGE) PARTITION BY RANGE ({key})"
    )
    while month <= last:
        following = _month_add(month, 1)
        # DDL takes no bound parameters: the bounds are literals made here.
        cursor.execute(
            f"CREATE TABLE {table}_p{month:%Y_%m} PARTITION OF {new} "
            f"FOR VALUES FROM ('{month.isoformat()}') TO ('{following.isoformat()}')"
        )
        month = following
    cursor.execute(f"CREATE TABLE {table}_default PARTITION OF {new} DEFAULT")
    cursor.execute(f"INSERT INTO {new} SELECT * FROM {table}")
    cursor.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_name = %s AND is_identity = 'YES'",
        [table],
    )
    identity = [row[0] for row in cursor.fetchall()]
    cursor.execute(f"DROP TABLE {table}")
    cursor.execute(f"ALTER TABLE {new} RENAME TO {table}")
    for column in identity:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, column])
        sequence = cursor.fetchone()[0]
        cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {table}_{column}_seq")
        cursor.execute(
            f"SELECT setval('{table}_{column}_seq', coalesce(max({column}), 0) + 1, false) "
            f"FROM {table}"
        )
    cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY (id, {key})")
    for name, definition in constraints:
        cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    for definition in indexes:
        cursor.execute(definition)


def partition_history(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        for table, key in TABLES:
            _partition(cursor, table, key)


class Migration(migrations.Migration):
    dependencies = [
        ("history", "0001_initial"),
        ("notify", "0011_event_keys"),
        ("deliveries", "0015_history_month_keys"),
        ("campaigns", "0003_holds_without_db_references"),
    ]

    operations = [migrations.RunPython(partition_history, migrations.RunPython.noop)]
