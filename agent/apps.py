from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = _("Assistant")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401  (registers checks and receivers)
        from .attachments import lifecycle  # noqa: F401  (stored files go with their rows)
        from .tools import registry

        registry.autodiscover()
