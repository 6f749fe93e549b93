# Erasure keeps consent records: detached from the recipient (never cascaded away) and
# keyed by a hash of the user id.
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0010_erasure"),
        ("preferences", "0001_preferences_consent_quiet_hours_caps"),
    ]

    operations = [
        migrations.AlterField(
            model_name="consentrecord",
            name="recipient",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="consents",
                to="notify.recipient",
            ),
        ),
        migrations.AddField(
            model_name="consentrecord",
            name="user_hash",
            field=models.CharField(
                blank=True,
                db_index=True,
                help_text="After erasure: the keyed hash of the person's user id, the "
                "record's only link to them.",
                max_length=64,
            ),
        ),
    ]
