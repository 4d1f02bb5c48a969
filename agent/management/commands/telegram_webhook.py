"""``manage.py telegram_webhook <url>``: tell Telegram where to POST the bot's updates (webhook mode)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agent.telegram import bot, polling
from agent.telegram.polling import ALLOWED


class Command(BaseCommand):
    help = "Set the Telegram bot's webhook to this site's agent:telegram_webhook URL (or --delete it)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("url", nargs="?", help="The public https URL of agent:telegram_webhook.")
        parser.add_argument("--delete", action="store_true", help="Remove the webhook instead.")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = bot.config()
        if settings is None:
            raise CommandError("Telegram is off: set AGENT['TELEGRAM'] with the bot's token.")
        if options["delete"]:
            polling.drop_webhook()
            self.stdout.write("The webhook is removed.")
            return
        url = options["url"]
        if not url or not url.startswith("https://"):
            raise CommandError("Give the webhook's public https:// URL (Telegram calls only https).")
        if not settings.secret:
            raise CommandError("Set AGENT['TELEGRAM']['SECRET']: Telegram sends it with every update.")

        async def make(client: Any) -> Any:
            return await client.set_webhook(url, secret_token=settings.secret, allowed_updates=ALLOWED)

        try:
            bot.call(make)
        except bot.BotError as error:
            raise CommandError(f"Telegram refused the webhook ({error.kind}).") from None
        self.stdout.write(f"Telegram sends @{settings.username}'s updates to {url}.")
