"""Campaigns: the turns of a local-time campaign with a rate, and audience files staged
before launch (estimated, then launched exactly as staged)."""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0005_campaign_pacing"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="local_slots",
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
        migrations.CreateModel(
            name="StagedUpload",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("file_name", models.CharField(blank=True, max_length=255)),
                ("uploaded_count", models.PositiveIntegerField()),
                ("unknown_count", models.PositiveIntegerField()),
                ("staged_at", models.DateTimeField(auto_now_add=True)),
                (
                    "staged_by",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="StagedMember",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("user_id", models.CharField(max_length=255)),
                (
                    "staged",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="campaigns.stagedupload",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("staged", "user_id"), name="uniq_staged_member")
                ],
            },
        ),
    ]
