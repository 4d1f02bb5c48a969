"""An ASGI module that fails on import the way one fails when it imports Channels before Django is set up."""

from django.core.exceptions import ImproperlyConfigured

raise ImproperlyConfigured(
    "Requested setting INSTALLED_APPS, but settings are not configured. You must either define the environment "
    "variable DJANGO_SETTINGS_MODULE or call settings.configure() before accessing settings."
)
