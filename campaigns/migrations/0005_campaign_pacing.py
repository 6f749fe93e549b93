"""Campaign pacing: a send rate, local-time delivery, and when the paced schedule starts."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0004_seed_lists"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="send_rate",
            field=models.FloatField(
                blank=True,
                help_text="Messages per second; empty: as fast as providers allow.",
                null=True,
                validators=[
                    django.core.validators.MinValueValidator(0.1),
                    django.core.validators.MaxValueValidator(10000.0),
                ],
            ),
        ),
        migrations.AddField(
            model_name="campaign",
            name="local_time",
            field=models.TimeField(
                blank=True,
                help_text="Deliver at this local time in each person's zone.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="campaign",
            name="paced_from",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
