import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent', '0015_confirmation_result'),
    ]

    operations = [
        migrations.CreateModel(
            name='QuotaUse',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('upload', 'upload'), ('transcription', 'transcription'), ('telegram_link', 'Telegram link try')], max_length=16)),
                ('key', models.CharField(max_length=64)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'verbose_name': 'quota use',
                'verbose_name_plural': 'quota uses',
                'ordering': ['-created_at'],
                'indexes': [models.Index(fields=['kind', 'key', 'created_at'], name='agent_quotause_who_when')],
            },
        ),
    ]
