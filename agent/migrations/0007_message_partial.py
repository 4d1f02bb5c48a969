from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0006_staff_and_secrets"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="partial",
            field=models.BooleanField(
                default=False,
                help_text="An answer cut short by a stop or the deadline: what the user saw.",
                verbose_name="partial",
            ),
        ),
    ]
