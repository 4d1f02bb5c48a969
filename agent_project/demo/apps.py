from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DemoConfig(AppConfig):
    """The demo of the host site: ``manage.py demo`` and its offline model. No models of its own."""

    name = "agent_project.demo"
    label = "demo"
    verbose_name = _("Demo")
