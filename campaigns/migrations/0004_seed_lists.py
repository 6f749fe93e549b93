from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0003_holds_without_db_references'),
    ]

    operations = [
        migrations.CreateModel(
            name='SeedList',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('addresses', models.JSONField(default=list, help_text='At most 50 email addresses.')),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['name'],
                'permissions': [('send_to_seed_list', 'Can send a draft or campaign to a seed list')],
            },
        ),
    ]
