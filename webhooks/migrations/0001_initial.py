# The status webhook models, moved here from the deliveries app with their tables as
# they were (deliveries_webhook…): Django's state takes them over; the database is untouched.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("deliveries", "0030_webhooks_to_own_app"),
        ("notify", "0020_category_labels"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="WebhookEndpoint",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("url", models.URLField(max_length=1024)),
                        ("description", models.CharField(blank=True, max_length=200)),
                        ("secret", models.CharField(max_length=100)),
                        ("previous_secret", models.CharField(blank=True, max_length=100)),
                        ("previous_secret_until", models.DateTimeField(blank=True, null=True)),
                        ("active", models.BooleanField(default=True)),
                        ("disabled_reason", models.TextField(blank=True)),
                        ("disabled_at", models.DateTimeField(blank=True, null=True)),
                        ("failing_since", models.DateTimeField(blank=True, null=True)),
                        ("failures_in_row", models.PositiveIntegerField(default=0)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "producer",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="webhook_endpoints",
                                to="notify.producer",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deliveries_webhookendpoint",
                        "ordering": ["pk"],
                    },
                ),
                migrations.CreateModel(
                    name="WebhookEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("msg_id", models.CharField(max_length=64, unique=True)),
                        (
                            "event_type",
                            models.CharField(
                                choices=[
                                    (
                                        "delivery.delivered",
                                        "A delivery was handed to its provider or feed",
                                    ),
                                    ("delivery.failed", "A delivery ended failed, dead or expired"),
                                    (
                                        "delivery.suppressed",
                                        "A delivery was not sent (gate, bounce list)",
                                    ),
                                    ("notification.routed", "A notification passed the gate"),
                                    (
                                        "delivery.reached",
                                        "The provider handed a delivery to the person",
                                    ),
                                    ("delivery.complained", "The person marked an email as spam"),
                                    ("delivery.opened", "The provider reported an email opened"),
                                    ("delivery.clicked", "The provider reported a link clicked"),
                                ],
                                max_length=40,
                            ),
                        ),
                        ("payload", models.JSONField()),
                        ("sequence", models.IntegerField(db_default=0, default=0)),
                        ("notification_id", models.UUIDField(blank=True, null=True)),
                        (
                            "recipient_id",
                            models.BigIntegerField(blank=True, db_index=True, null=True),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("pending", "Pending"),
                                    ("sending", "Sending"),
                                    ("delivered", "Delivered"),
                                    ("failed", "Failed (retries exhausted)"),
                                ],
                                default="pending",
                                max_length=10,
                            ),
                        ),
                        ("attempts", models.PositiveIntegerField(default=0)),
                        (
                            "attempts_before_redrive",
                            models.PositiveIntegerField(db_default=0, default=0),
                        ),
                        ("next_attempt_at", models.DateTimeField()),
                        ("claimed_at", models.DateTimeField(blank=True, null=True)),
                        ("enqueued_at", models.DateTimeField(blank=True, null=True)),
                        ("last_error", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField()),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "endpoint",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="events",
                                to="webhooks.webhookendpoint",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deliveries_webhookevent",
                    },
                ),
                migrations.CreateModel(
                    name="WebhookAttempt",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("number", models.PositiveIntegerField()),
                        ("started_at", models.DateTimeField()),
                        ("duration_ms", models.PositiveIntegerField()),
                        ("ok", models.BooleanField()),
                        ("status_code", models.CharField(blank=True, max_length=32)),
                        ("response", models.TextField(blank=True)),
                        (
                            "endpoint",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="attempts",
                                to="webhooks.webhookendpoint",
                            ),
                        ),
                        (
                            "event",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="tries",
                                to="webhooks.webhookevent",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deliveries_webhookattempt",
                    },
                ),
                migrations.CreateModel(
                    name="WebhookSubscription",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "event_type",
                            models.CharField(
                                choices=[
                                    (
                                        "delivery.delivered",
                                        "A delivery was handed to its provider or feed",
                                    ),
                                    ("delivery.failed", "A delivery ended failed, dead or expired"),
                                    (
                                        "delivery.suppressed",
                                        "A delivery was not sent (gate, bounce list)",
                                    ),
                                    ("notification.routed", "A notification passed the gate"),
                                    (
                                        "delivery.reached",
                                        "The provider handed a delivery to the person",
                                    ),
                                    ("delivery.complained", "The person marked an email as spam"),
                                    ("delivery.opened", "The provider reported an email opened"),
                                    ("delivery.clicked", "The provider reported a link clicked"),
                                ],
                                max_length=40,
                            ),
                        ),
                        (
                            "endpoint",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="subscriptions",
                                to="webhooks.webhookendpoint",
                            ),
                        ),
                        (
                            "producer",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="notify.producer",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deliveries_webhooksubscription",
                    },
                ),
                migrations.AddIndex(
                    model_name="webhookevent",
                    index=models.Index(
                        condition=models.Q(("status__in", ["pending", "sending"])),
                        fields=["next_attempt_at"],
                        name="webhook_event_due",
                    ),
                ),
                migrations.AddIndex(
                    model_name="webhookevent",
                    index=models.Index(
                        fields=["endpoint", "status"], name="webhook_event_endpoint"
                    ),
                ),
                migrations.AddIndex(
                    model_name="webhookevent",
                    index=models.Index(
                        condition=models.Q(("status", "pending")),
                        fields=["endpoint", "id"],
                        name="webhook_event_backlog",
                    ),
                ),
                migrations.AddIndex(
                    model_name="webhookevent",
                    index=models.Index(
                        condition=models.Q(("status", "failed")),
                        fields=["endpoint", "created_at"],
                        name="webhook_event_failed",
                    ),
                ),
                migrations.AddIndex(
                    model_name="webhookattempt",
                    index=models.Index(
                        fields=["endpoint", "-started_at"], name="webhook_attempt_recent"
                    ),
                ),
                migrations.AddIndex(
                    model_name="webhooksubscription",
                    index=models.Index(
                        fields=["producer", "event_type"], name="webhook_sub_lookup"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="webhooksubscription",
                    constraint=models.UniqueConstraint(
                        fields=("endpoint", "event_type"), name="uniq_webhook_sub"
                    ),
                ),
            ],
        ),
    ]
