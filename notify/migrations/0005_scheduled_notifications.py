"""Scheduled notifications: `Notification.send_at`, and `Outbox.due_at` — when the relay
may publish a row (existing rows: when they were created)."""

import django.utils.timezone
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("notify", "0004_outbox_notify_trigger")]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="send_at",
            field=models.DateTimeField(
                blank=True, help_text="Scheduled: not routed before this time.", null=True
            ),
        ),
        migrations.AddField(
            model_name="outbox", name="due_at", field=models.DateTimeField(null=True)
        ),
        migrations.RunSQL(
            "UPDATE notify_outbox SET due_at = created_at", migrations.RunSQL.noop
        ),
        migrations.AlterField(
            model_name="outbox",
            name="due_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RemoveIndex(model_name="outbox", name="outbox_unpublished"),
        migrations.AddIndex(
            model_name="outbox",
            index=models.Index(
                condition=Q(published_at__isnull=True),
                fields=["due_at"],
                name="outbox_unpublished_due",
            ),
        ),
    ]
