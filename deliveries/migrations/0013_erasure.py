# Erasure: the gate's new reason `erasure_hold` (a person registered again after an
# erasure receives nothing before fresh consent). The full list of reasons at this point.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0012_render_limit"),
    ]

    operations = [
        migrations.AlterField(
            model_name="delivery",
            name="reason",
            field=models.CharField(blank=True, choices=[('opted_out', 'The recipient opted out of this category on this channel'), ('no_consent', 'No recorded marketing consent'), ('quiet_hours', "Inside the recipient's quiet hours"), ('frequency_cap', 'Daily marketing cap reached'), ('no_address', 'The recipient has no address for this channel'), ('unsubscribed', 'The recipient unsubscribed'), ('channel_unavailable', 'This channel is not enabled on the platform'), ('erasure_hold', 'This user id or address was erased on request; nothing is sent before fresh consent'), ('not_gated', 'Created outside the gate; refused by the sender'), ('no_template', 'No published template for this category and channel'), ('render_error', 'The template could not be rendered'), ('render_limit', 'Rendering the template took too long or grew too large'), ('rejected', 'The provider refused it permanently'), ('retries_exhausted', 'Every retry failed'), ('deadline_passed', 'The next retry would fall past the deadline'), ('push_limit', 'The recipient already had the most push jobs in flight'), ('campaign_paused', 'Held while its campaign is paused'), ('campaign_cancelled', 'Its campaign was cancelled'), ('address_suppressed', 'The address bounced hard before (see Address suppressions); not tried again'), ('newer_delivered', 'A newer event about the same subject already reached the person on this channel')], max_length=32),
        ),
    ]
