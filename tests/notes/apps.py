from django.apps import AppConfig


class NotesConfig(AppConfig):
    """The test site's domain: notes a user owns, read and written through the assistant's tools."""

    name = "tests.notes"
    label = "notes"
    default_auto_field = "django.db.models.BigAutoField"
