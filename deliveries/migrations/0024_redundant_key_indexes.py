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
        ("deliveries", "0023_success_recent_index"),
        ("notify", "0017_redundant_key_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="delivery",
                    name="notification",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deliveries",
                        to="notify.notification",
                    ),
                ),
                migrations.AlterField(
                    model_name="deliveryattempt",
                    name="delivery",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempt_log",
                        to="deliveries.delivery",
                    ),
                ),
            ],
            database_operations=[
                _index_drop(
                    "deliveries_delivery_notification_id_2ed7a068",
                    "deliveries_delivery",
                    "notification_id",
                ),
                _index_drop(
                    "deliveries_deliveryattempt_delivery_id_85da7e15",
                    "deliveries_deliveryattempt",
                    "delivery_id",
                ),
            ],
        ),
    ]
