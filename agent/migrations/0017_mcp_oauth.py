import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent', '0016_quota_use'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='mcpcall',
            name='oauth_application_id',
            field=models.BigIntegerField(blank=True, null=True, verbose_name='OAuth client'),
        ),
        migrations.AlterField(
            model_name='mcpcall',
            name='token',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='calls', to='agent.mcptoken'),
        ),
        migrations.AlterField(
            model_name='mcpcall',
            name='token_name',
            field=models.CharField(max_length=255, verbose_name='token'),
        ),
        migrations.AlterField(
            model_name='quotause',
            name='kind',
            field=models.CharField(choices=[('upload', 'upload'), ('transcription', 'transcription'), ('telegram_link', 'Telegram link try'), ('mcp_registration', 'MCP client registration')], max_length=16),
        ),
        migrations.AddIndex(
            model_name='mcpcall',
            index=models.Index(fields=['oauth_application_id', 'user', 'at'], name='agent_mcpcall_oauth_at'),
        ),
        migrations.AddConstraint(
            model_name='mcpcall',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('oauth_application_id__isnull', True), ('token__isnull', False)), models.Q(('oauth_application_id__isnull', False), ('token__isnull', True)), _connector='OR'), name='agent_mcpcall_one_credential'),
        ),
    ]
