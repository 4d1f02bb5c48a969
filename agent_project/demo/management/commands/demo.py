"""``manage.py demo``: the whole product on one machine, with no services.

The host site's command, never the app's: it makes a staff user ``demo`` with
the password ``demo``, which only a throw-away demo site may have.

Migrates the SQLite database, makes a demo user (printed), starts a Celery
worker and the sweep inside this process, points the offline demo model at
an endpoint when no real one is configured, and serves the site on
127.0.0.1:8000.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from agent.models import AgentSettings, Endpoint
from agent_project.demo import hearing, offline
from agent_project.notes.models import Note

DEMO_PERMISSIONS = [
    "use_agent",
    "use_telegram",
    "manage_agent",
    "manage_endpoints",
    "view_chat_content",
    "view_note",
    "add_note",
    "change_note",
]
OFFLINE_ENDPOINT = "Offline demo model (no network)"


class Command(BaseCommand):
    help = "Run the demo: SQLite, in-memory channel layer and broker, a worker in this process."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--no-serve", action="store_true", help="Set everything up, then exit.")

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.CELERY_BROKER_URL != "memory://" and not options["no_serve"]:
            raise CommandError("The demo runs its own worker on the in-memory broker: unset CELERY_BROKER_URL.")
        call_command("migrate", interactive=False, verbosity=0)
        username, password = self._demo_user()
        endpoint = self._endpoint()
        self.stdout.write(self.style.SUCCESS("The demo is ready."))
        self.stdout.write(f"  Open http://{options['addrport']}/ and sign in as {username} / {password}")
        self.stdout.write(f"  Model: {endpoint.name} ({endpoint.model})")
        if options["no_serve"]:
            return
        _start_worker()
        if _start_telegram_reader():
            self.stdout.write("  Telegram: reading updates for the bot; connect it on My assistant.")
        call_command("runserver", options["addrport"], use_reloader=False, insecure_serving=True)

    def _demo_user(self) -> tuple[str, str]:
        username, password = "demo", "demo"
        user, _created = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": True})
        user.set_password(password)
        user.is_staff = True
        user.save()
        user.user_permissions.add(*Permission.objects.filter(codename__in=DEMO_PERMISSIONS))
        if not Note.objects.filter(owner=user).exists():
            Note.objects.create(owner=user, title="Shopping", body="Milk, bread, apples")
            Note.objects.create(owner=user, title="Ideas", body="Try the assistant on real notes")
        return username, password

    def _endpoint(self) -> Endpoint:
        site = AgentSettings.current()
        if site.default_endpoint and site.default_endpoint.enabled and site.default_endpoint.name != OFFLINE_ENDPOINT:
            return site.default_endpoint
        endpoint, _created = Endpoint.objects.update_or_create(
            name=OFFLINE_ENDPOINT,
            defaults={
                "base_url": offline.serve(),
                "model": offline.MODEL_NAME,
                "api_key": "",
                "enabled": True,
                "supports_tools": True,
                "supports_images": True,  # it names the pictures it is sent
                "supports_transcription": hearing.available(),  # its offline recognizer, where installed
                "timeout_s": 10,
            },
        )
        site.default_endpoint = endpoint
        site.speech_endpoint = endpoint if endpoint.supports_transcription else None
        site.save()
        return endpoint


def _start_worker() -> None:
    """A Celery worker on threads, and the sweep every 10 s, inside this process."""
    from agent.core.conf import agent_settings
    from agent.tasks import sweep_turns
    from agent_project.celery import app

    worker = app.WorkController(
        pool_cls="threads",
        concurrency=4,
        queues=[agent_settings.TASK_QUEUE],
        loglevel="WARNING",
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
    )
    threading.Thread(target=worker.start, name="demo-celery-worker", daemon=True).start()
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(10):
            sweep_turns.delay()

    threading.Thread(target=sweep, name="demo-sweep", daemon=True).start()


def _start_telegram_reader() -> bool:
    """The reader of Telegram updates in this process, when the site's bot polls (``TELEGRAM_TOKEN``)."""
    from agent.telegram import bot, polling

    settings = bot.config()
    if settings is None or settings.mode != "polling":
        return False
    threading.Thread(target=polling.run, args=(threading.Event(),), name="demo-telegram", daemon=True).start()
    return True
