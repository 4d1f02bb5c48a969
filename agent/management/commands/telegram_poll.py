"""``manage.py telegram_poll``: the site's reader of Telegram updates in polling mode.

Run it in one or more processes (a supervisor, a container): only one reads at a time, under a lease,
and another takes over within the lease's time when it stops. Workers handle what it records.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agent.telegram import bot, polling


class Command(BaseCommand):
    help = "Read the Telegram bot's updates (polling mode) until stopped; only one process reads at a time."

    def handle(self, *args: Any, **options: Any) -> None:
        settings = bot.config()
        if settings is None:
            raise CommandError("Telegram is off: set AGENT['TELEGRAM'] with the bot's token.")
        if settings.mode != "polling":
            raise CommandError(
                "AGENT['TELEGRAM']['MODE'] is 'webhook': Telegram sends the updates, nothing reads them."
            )
        stop = threading.Event()
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, lambda *_: stop.set())
        polling.drop_webhook()
        self.stdout.write(f"Reading updates for @{settings.username}; Ctrl+C stops.")
        polling.run(stop)
