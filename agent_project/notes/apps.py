from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class NotesConfig(AppConfig):
    name = "agent_project.notes"
    label = "notes"
    verbose_name = _("Notes")
    default_auto_field = "django.db.models.BigAutoField"
