"""The outbox row carries its notification's producer, with an index of the waiting rows
by (class, producer, due time): the relay's fair select probes it once per producer
instead of reading every waiting row of the class each round."""

import django.db.models.deletion
from django.db import migrations, models

# Rows waiting when this runs get their producer; published rows are never read by it.
BACKFILL_WAITING = """
UPDATE notify_outbox o SET producer_id = n.producer_id
  FROM notify_notification n
 WHERE n.id = o.notification_id AND o.published_at IS NULL AND o.producer_id IS NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0018_producers_guarded"),
    ]

    operations = [
        migrations.AddField(
            model_name="outbox",
            name="producer",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="notify.producer",
            ),
        ),
        migrations.AddIndex(
            model_name="outbox",
            index=models.Index(
                condition=models.Q(("published_at__isnull", True)),
                fields=["queue", "producer", "due_at", "id"],
                name="outbox_unpublished_producer",
            ),
        ),
        migrations.RunSQL(BACKFILL_WAITING, migrations.RunSQL.noop),
    ]
