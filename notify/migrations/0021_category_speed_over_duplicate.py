# Whether a category's message whose provider call ended without a clear answer goes
# through the channel's next provider at once (speed over a rare duplicate).
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notify", "0020_category_labels")]

    operations = [
        migrations.AddField(
            model_name="category",
            name="speed_over_duplicate",
            field=models.BooleanField(
                default=False,
                help_text="When a provider's call ends without a clear answer (it may have "
                "taken the message), send through the channel's next provider at once: a "
                "rare duplicate is better than a late message (login codes). Off: never sent "
                "elsewhere then.",
            ),
        ),
    ]
