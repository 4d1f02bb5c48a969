import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

LANGUAGES = [(f"lang{n:03d}", f"Language {n:03d}") for n in range(600)]
STYLES = [(f"style{n:02d}", f"Style {n:02d}") for n in range(48)]


class Migration(migrations.Migration):
    initial = True

    dependencies = [migrations.swappable_dependency(settings.AUTH_USER_MODEL)]

    operations = [
        migrations.CreateModel(
            name="Tag",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="Child",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("first_name", models.CharField(max_length=100)),
                ("slug", models.SlugField(unique=True)),
                ("birth_date", models.DateField()),
            ],
            options={"ordering": ["first_name"], "verbose_name_plural": "children"},
        ),
        migrations.CreateModel(
            name="Timer",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(blank=True, max_length=100)),
                ("start", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "child",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="timers", to="babycare.child"
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={"ordering": ["-start"]},
        ),
        migrations.CreateModel(
            name="Feeding",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("start", models.DateTimeField()),
                ("end", models.DateTimeField()),
                (
                    "method",
                    models.CharField(
                        choices=[("bottle", "Bottle"), ("left breast", "Left breast"), ("right breast", "Right breast")],
                        max_length=20,
                    ),
                ),
                ("amount", models.FloatField(blank=True, null=True)),
                (
                    "child",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="feedings", to="babycare.child"
                    ),
                ),
            ],
            options={"ordering": ["-start"]},
        ),
        migrations.CreateModel(
            name="Weight",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("weight", models.FloatField()),
                ("date", models.DateField()),
                ("notes", models.TextField(blank=True)),
                (
                    "child",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="weights", to="babycare.child"
                    ),
                ),
                ("tags", models.ManyToManyField(blank=True, related_name="+", to="babycare.tag")),
            ],
            options={"ordering": ["-date"]},
        ),
        migrations.CreateModel(
            name="Snippet",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("title", models.CharField(blank=True, default="", max_length=100)),
                ("code", models.TextField()),
                ("language", models.CharField(choices=LANGUAGES, default="lang000", max_length=100)),
                ("style", models.CharField(choices=STYLES, default="style00", max_length=100)),
                ("picture", models.FileField(blank=True, upload_to="snippets/")),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={"ordering": ["created"]},
        ),
    ]
