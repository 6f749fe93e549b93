import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0009_address_suppression"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="DeadLetter",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("message_id", models.CharField(help_text="The Celery task id (else a hash of the body).", max_length=255, unique=True)),
                ("task", models.CharField(blank=True, max_length=255)),
                ("arguments", models.JSONField(default=dict, help_text="The task's args and kwargs.")),
                ("reason", models.CharField(help_text="RabbitMQ's: rejected, expired, maxlen or delivery_limit.", max_length=32)),
                ("queue", models.CharField(help_text="The queue it died in.", max_length=255)),
                ("exchange", models.CharField(blank=True, max_length=255)),
                ("routing_key", models.CharField(max_length=255)),
                ("death_headers", models.JSONField(default=list, help_text="The x-death header, as received.")),
                ("headers", models.JSONField(default=dict, help_text="Its own headers, republished as is.")),
                ("body", models.TextField()),
                ("content_type", models.CharField(max_length=100)),
                ("content_encoding", models.CharField(max_length=50)),
                ("priority", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("count", models.PositiveIntegerField(default=1, help_text="Times it reached dead_letter.")),
                ("first_seen_at", models.DateTimeField()),
                ("last_seen_at", models.DateTimeField()),
                ("redriven_at", models.DateTimeField(blank=True, null=True)),
                ("redriven_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "ordering": ["-last_seen_at"],
                "indexes": [models.Index(condition=models.Q(("redriven_at__isnull", True)), fields=["last_seen_at"], name="dead_letter_open")],
            },
        ),
        migrations.CreateModel(
            name="TemplateTestSend",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("notification", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="template_test_send", to="notify.notification")),
                ("requested_by", models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
                ("version", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="templates_admin.templateversion")),
            ],
        ),
    ]
