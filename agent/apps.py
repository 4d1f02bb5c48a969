from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = _("Assistant")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from . import signals  # noqa: F401  (registers receivers)
        from .attachments import lifecycle  # noqa: F401  (stored files go with their rows)
        from .checks import extras, services, settings, site  # noqa: F401  (register the system checks)
        from .models import Message
        from .telegram import delivery
        from .tools import registry
        from .turns import stream

        registry.autodiscover()
        post_save.connect(delivery.message_stored, sender=Message, dispatch_uid="agent.telegram")
        stream.follow(delivery.draft_mirror)
