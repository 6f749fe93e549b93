# Provider failover within a channel: each attempt names its provider, and a delivery
# whose call ended without a clear answer stays with that provider.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0028_bounce_mail")]

    operations = [
        migrations.AddField(
            model_name="deliveryattempt",
            name="provider",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="The provider this try went to (one channel may fail over between "
                "several).",
                max_length=32,
            ),
        ),
        migrations.AddField(
            model_name="delivery",
            name="pinned_provider",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="A provider whose call ended without a clear answer (it may have "
                "taken the message): later tries go there only, unless the category puts "
                "speed first.",
                max_length=32,
            ),
        ),
    ]
