"""A category's label and description per language, for the pages, footers and inbox a
person sees in their own language (notify/category_labels.py)."""

from django.db import migrations, models

import notify.category_labels


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0019_outbox_producer"),
    ]

    operations = [
        migrations.AddField(
            model_name="category",
            name="labels",
            field=models.JSONField(
                blank=True,
                default=dict,
                validators=[notify.category_labels.validate_category_labels],
            ),
        ),
    ]
