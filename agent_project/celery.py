"""The host site's Celery app: ``celery -A agent_project worker``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_project.settings")

app = Celery("agent_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
