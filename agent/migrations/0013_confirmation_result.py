from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0012_telegram_and_voice"),
    ]

    operations = [
        migrations.AddField(
            model_name="confirmation",
            name="result",
            field=models.TextField(blank=True),
        ),
    ]
