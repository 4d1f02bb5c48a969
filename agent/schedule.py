"""What Celery beat must send for the app, importable from a site's settings.

``CELERY_BEAT_SCHEDULE = {**BEAT_SCHEDULE, ...}``: the sweep ends turns whose
worker died (so it runs often), the purges keep retention and remove files
left unlinked (nightly). This module imports nothing of Django's, so
settings may import it.
"""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "agent-sweep-turns": {"task": "agent.sweep_turns", "schedule": 10.0},
    "agent-purge-chats": {"task": "agent.purge_chats", "schedule": crontab(hour=3, minute=0)},
    "agent-purge-attachments": {"task": "agent.purge_attachments", "schedule": crontab(hour=3, minute=30)},
    "agent-purge-telegram": {"task": "agent.purge_telegram", "schedule": crontab(hour=3, minute=45)},
}
