# Per-recipient order: when an event happened and what it is about, on the notification
# and on its feed entry (the feed is ordered by it).
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0008_outbox_class_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="occurred_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.AddField(
            model_name="notification",
            name="subject",
            field=models.CharField(
                blank=True,
                db_default="",
                help_text="What the event is about (order:A-1001): an older event is not sent "
                "on push, SMS or email once a newer one about it reached the person there.",
                max_length=200,
            ),
        ),
        migrations.AddField(
            model_name="feedentry",
            name="occurred_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.AddField(
            model_name="feedentry",
            name="accepted_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        # Events accepted before this happened when they were accepted.
        migrations.RunSQL(
            "UPDATE notify_notification SET occurred_at = created_at",
            migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            """
            UPDATE notify_feedentry f
               SET occurred_at = n.occurred_at, accepted_at = n.created_at
              FROM notify_notification n
             WHERE n.id = f.notification_id
            """,
            migrations.RunSQL.noop,
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("routed_at__isnull", True)),
                fields=["recipient", "occurred_at"],
                name="notif_unrouted_order",
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("subject", ""), _negated=True),
                fields=["recipient", "subject"],
                name="notif_recipient_subject",
            ),
        ),
        migrations.AddIndex(
            model_name="feedentry",
            index=models.Index(
                fields=["recipient", "-occurred_at", "-accepted_at", "-id"],
                name="feed_recipient_occurred",
            ),
        ),
    ]
