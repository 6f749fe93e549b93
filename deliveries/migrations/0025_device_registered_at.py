"""Devices: when each was last registered, which the cap on devices per person keeps the
most recent of. An existing device starts at its `updated_at`: until now only a
registration (or its deactivation, after which it no longer counts) wrote that."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0024_redundant_key_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="device",
            name="registered_at",
            field=models.DateTimeField(
                default=django.utils.timezone.now,
                help_text="When its browser/app last registered it (or again).",
            ),
        ),
        migrations.RunSQL(
            "UPDATE deliveries_device SET registered_at = updated_at",
            migrations.RunSQL.noop,
        ),
    ]
