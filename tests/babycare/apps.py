from django.apps import AppConfig


class BabycareConfig(AppConfig):
    name = "tests.babycare"
    label = "babycare"
    default_auto_field = "django.db.models.BigAutoField"
