# Per-recipient order on each channel (the order columns, the hold, its index, the
# attempt's held time) and the `superseded` status with its reason.
import django.db.models.deletion
from django.db import migrations, models

STATUSES = [
    ("queued", "Queued"),
    ("sending", "Sending"),
    ("retrying", "Retrying"),
    ("delivered", "Delivered"),
    ("failed", "Failed (permanent)"),
    ("dead", "Dead (retries exhausted)"),
    ("expired", "Expired (past deadline)"),
    ("suppressed", "Suppressed"),
    ("deferred", "Deferred"),
    ("skipped_live", "Skipped (device live)"),
    ("cancelled", "Cancelled"),
    ("superseded", "Superseded (a newer event about it got there first)"),
]
REASONS = [
    ("opted_out", "The recipient opted out of this category on this channel"),
    ("no_consent", "No recorded marketing consent"),
    ("quiet_hours", "Inside the recipient's quiet hours"),
    ("frequency_cap", "Daily marketing cap reached"),
    ("no_address", "The recipient has no address for this channel"),
    ("unsubscribed", "The recipient unsubscribed"),
    ("channel_unavailable", "This channel is not enabled on the platform"),
    ("not_gated", "Created outside the gate; refused by the sender"),
    ("no_template", "No published template for this category and channel"),
    ("render_error", "The template could not be rendered"),
    ("rejected", "The provider refused it permanently"),
    ("retries_exhausted", "Every retry failed"),
    ("deadline_passed", "The next retry would fall past the deadline"),
    ("push_limit", "The recipient already had the most push jobs in flight"),
    ("campaign_paused", "Held while its campaign is paused"),
    ("campaign_cancelled", "Its campaign was cancelled"),
    (
        "address_suppressed",
        "The address bounced hard before (see Address suppressions); not tried again",
    ),
    (
        "newer_delivered",
        "A newer event about the same subject already reached the person on this channel",
    ),
]


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0010_dead_letters"),
        ("notify", "0009_occurred_at_subject"),
    ]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="recipient",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="notify.recipient",
            ),
        ),
        migrations.AddField(
            model_name="delivery",
            name="occurred_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="delivery",
            name="accepted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="delivery",
            name="held_since",
            field=models.DateTimeField(
                blank=True,
                help_text="First held back for an earlier delivery; see attempts.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="held_ms",
            field=models.PositiveIntegerField(
                default=0,
                help_text="How long it was held back for an earlier delivery to the same "
                "person on this channel (NOTIFY_ORDER_WAIT_MAX bounds it).",
            ),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="status",
            field=models.CharField(choices=STATUSES, default="queued", max_length=16),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="reason",
            field=models.CharField(blank=True, choices=REASONS, max_length=32),
        ),
        # Deliveries still on their way take part in the order from the start.
        migrations.RunSQL(
            """
            UPDATE deliveries_delivery d
               SET recipient_id = n.recipient_id, occurred_at = n.occurred_at,
                   accepted_at = n.created_at
              FROM notify_notification n
             WHERE n.id = d.notification_id AND d.status IN ('queued', 'sending', 'retrying')
            """,
            migrations.RunSQL.noop,
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(
                    ("status__in", ["queued", "sending"]),
                    models.Q(("attempts", 0), ("status", "retrying")),
                    _connector="OR",
                ),
                fields=["recipient", "channel", "occurred_at", "accepted_at", "notification"],
                name="delivery_order_pending",
            ),
        ),
    ]
