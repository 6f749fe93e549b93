# The status webhook models moved to the webhooks app; their tables stay as they are
# (webhooks.0001_initial takes them over in Django's state only).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0029_provider_failover"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="webhookendpoint",
                    name="producer",
                ),
                migrations.RemoveField(
                    model_name="webhookevent",
                    name="endpoint",
                ),
                migrations.RemoveField(
                    model_name="webhooksubscription",
                    name="endpoint",
                ),
                migrations.RemoveField(
                    model_name="webhooksubscription",
                    name="producer",
                ),
                migrations.DeleteModel(
                    name="WebhookAttempt",
                ),
                migrations.DeleteModel(
                    name="WebhookEvent",
                ),
                migrations.DeleteModel(
                    name="WebhookEndpoint",
                ),
                migrations.DeleteModel(
                    name="WebhookSubscription",
                ),
            ],
        ),
    ]
