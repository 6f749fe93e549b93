# Erasure: the ledger, the suppression list (keyed hashes), the hold on a recipient
# registered again after an erasure, and the permission to erase.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0009_occurred_at_subject"),
    ]

    operations = [
        migrations.AddField(
            model_name="recipient",
            name="erasure_hold_since",
            field=models.DateTimeField(
                blank=True,
                null=True,
                help_text="Registered with a user id or address that was erased before: "
                "nothing is sent until the person gives fresh consent.",
            ),
        ),
        migrations.AlterModelOptions(
            name="recipient",
            options={"permissions": [("erase_recipient", "Can erase a person on request")]},
        ),
        migrations.CreateModel(
            name="Erasure",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("user_hash", models.CharField(db_index=True, help_text="Keyed hash of the user id (erasure_hash).", max_length=64)),
                ("recipient_pk", models.BigIntegerField(blank=True, help_text="The recipient id the erased rows had; empty if none.", null=True)),
                ("via", models.CharField(choices=[("api", "API (DELETE /v1/users/{user_id})"), ("admin", "Admin"), ("command", "Management command")], max_length=10)),
                ("requested_by", models.CharField(max_length=200)),
                ("erased_at", models.DateTimeField(auto_now_add=True)),
                ("removed", models.JSONField(blank=True, default=dict, help_text="Rows removed, per kind.")),
            ],
            options={"ordering": ["-erased_at"]},
        ),
        migrations.CreateModel(
            name="ErasureSuppression",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(choices=[("user_id", "User id"), ("email", "Email address"), ("phone", "Phone number")], max_length=10)),
                ("key", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("kind", "key"), name="uniq_erasure_suppression")],
            },
        ),
    ]
