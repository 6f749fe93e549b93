# The provider message id kept two B-trees, Django's pair for an indexed CharField: a
# plain one and a varchar_pattern_ops one, which serves equality as well as the prefix
# match a long SMS's part needs. The plain one goes; the other is renamed and declared in
# Meta.indexes. Plain SQL, so that the index already built (on every monthly partition)
# is kept rather than built again.

from django.db import migrations, models

PLAIN = "deliveries_delivery_provider_message_id_147fe7fa"
PATTERN = "deliveries_delivery_provider_message_id_147fe7fa_like"
NAME = "delivery_provider_message_id"


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0032_provider_event_unsubscribed_kind"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql=[f"DROP INDEX IF EXISTS {PLAIN}", f"ALTER INDEX {PATTERN} RENAME TO {NAME}"],
                    reverse_sql=[
                        f"ALTER INDEX {NAME} RENAME TO {PATTERN}",
                        f"CREATE INDEX {PLAIN} ON deliveries_delivery (provider_message_id)",
                    ],
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="delivery",
                    name="provider_message_id",
                    field=models.CharField(
                        blank=True, help_text="Receipts (SMS DLRs) find it by this.", max_length=255
                    ),
                ),
                migrations.AddIndex(
                    model_name="delivery",
                    index=models.Index(
                        fields=["provider_message_id"],
                        name=NAME,
                        opclasses=["varchar_pattern_ops"],
                    ),
                ),
            ],
        ),
    ]
