"""Drop the foreign keys' own indexes that another index already leads with.

Each row written or updated pays for every index of its table; these kept nothing that
the other index (named in the model) does not give. Only the indexes go: Django's own
AlterField would also drop and re-add the foreign-key constraints, which checks every
row of a partitioned table again. DROP INDEX on a partitioned table's index drops its
partitions' indexes too (briefly locking the table; no CONCURRENTLY on a partitioned
index).
"""

import django.db.models.deletion
from django.db import migrations, models


def _index_drop(name: str, table: str, column: str) -> migrations.RunSQL:
    """Drop index `name`; backwards, build it again on `table` (`column`)."""
    return migrations.RunSQL(
        f'DROP INDEX IF EXISTS "{name}"',
        f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
    )


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0016_digest_windows_inapp"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="eventkey",
                    name="producer",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="notify.producer",
                    ),
                ),
                migrations.AlterField(
                    model_name="feedentry",
                    name="notification",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="feed_entries",
                        to="notify.notification",
                    ),
                ),
                migrations.AlterField(
                    model_name="feedentry",
                    name="recipient",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="feed",
                        to="notify.recipient",
                    ),
                ),
                migrations.AlterField(
                    model_name="notification",
                    name="recipient",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="notifications",
                        to="notify.recipient",
                    ),
                ),
            ],
            database_operations=[
                _index_drop(
                    "notify_eventkey_producer_id_a46595da", "notify_eventkey", "producer_id"
                ),
                _index_drop(
                    "notify_feedentry_notification_id_d2dfffe4",
                    "notify_feedentry",
                    "notification_id",
                ),
                _index_drop(
                    "notify_feedentry_recipient_id_6add6eae", "notify_feedentry", "recipient_id"
                ),
                _index_drop(
                    "notify_notification_recipient_id_07222ca5",
                    "notify_notification",
                    "recipient_id",
                ),
            ],
        ),
    ]
