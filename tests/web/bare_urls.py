"""A host site that names none of Django's auth or i18n URLs: only the assistant is mounted."""

from django.urls import include, path

urlpatterns = [path("assistant/", include("agent.urls"))]
