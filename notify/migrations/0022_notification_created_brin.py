"""The notification's `created_at` gets a BRIN index in place of its B-tree.

What reads notifications by `created_at` alone reads a range of them (the route sweep's
window), which BRIN serves from a few pages, and rows arrive in `created_at` order. One
row is always found by its primary key (id, created_at). The B-tree did harm there: on a
partition with no statistics yet (a new month's, or a fresh install's first minute), the
planner took it for such a lookup, and a campaign's fan-out gives thousands of rows one
`created_at`, so the sender's load of a 200-delivery batch read some 400,000 rows
(80 ms instead of 3). A BRIN index also costs each insert almost nothing. DROP INDEX on
a partitioned table's index drops its partitions' indexes too.
"""

import django.contrib.postgres.indexes
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0021_category_speed_over_duplicate"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="notification",
                    name="created_at",
                    field=models.DateTimeField(auto_now_add=True),
                ),
                migrations.AddIndex(
                    model_name="notification",
                    index=django.contrib.postgres.indexes.BrinIndex(
                        fields=["created_at"], name="notif_created_brin"
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "notify_notification_created_at_edebf563"',
                    'CREATE INDEX IF NOT EXISTS "notify_notification_created_at_edebf563"'
                    ' ON "notify_notification" ("created_at")',
                ),
                migrations.RunSQL(
                    'CREATE INDEX IF NOT EXISTS "notif_created_brin"'
                    ' ON "notify_notification" USING brin ("created_at")',
                    'DROP INDEX IF EXISTS "notif_created_brin"',
                ),
            ],
        ),
    ]
