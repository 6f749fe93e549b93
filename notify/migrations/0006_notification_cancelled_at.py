from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notify", "0005_scheduled_notifications")]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="cancelled_at",
            field=models.DateTimeField(
                blank=True,
                help_text="The producer cancelled it; what was not sent is not.",
                null=True,
            ),
        ),
    ]
