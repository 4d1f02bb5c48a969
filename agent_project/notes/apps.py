from django.apps import AppConfig


class NotesConfig(AppConfig):
    name = "agent_project.notes"
    label = "notes"
    verbose_name = "Notes"
    default_auto_field = "django.db.models.BigAutoField"
