from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0014_journal_tools_offered"),
    ]

    operations = [
        migrations.AddField(
            model_name="confirmation",
            name="result",
            field=models.TextField(blank=True),
        ),
    ]
