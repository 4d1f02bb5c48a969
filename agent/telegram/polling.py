"""The reader of polling mode: one process for the whole site asks Telegram for updates.

Telegram refuses a second reader of one token (409), so the reader holds a lease
(``agent.turns.locks.TELEGRAM_READER``): a process that does not hold it waits, and takes over
when the holder stops renewing it. Each update is recorded once (``updates.record``) and handled by
a worker, as a webhook's would be; the offset is kept in the database, so a new reader goes on where
the last stopped.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from django.db import close_old_connections, connection

from ..models import TelegramBot
from ..turns import locks
from . import updates
from .bot import CONFLICT, RATE_LIMITED, BotError, call, config

logger = logging.getLogger(__name__)

POLL_S = 10
"""How long one request waits for updates: well within the reader's lease, which it renews after each."""
IDLE_S = 5.0
"""How long a process that is not the reader (or hit an error) waits before it tries again."""
ALLOWED = ["message", "callback_query"]


def run(stop: threading.Event) -> None:
    """Read updates until ``stop`` is set, whenever this process holds the reader's lease."""
    holder = uuid.uuid4()
    try:
        while not stop.is_set():
            close_old_connections()
            if config() is None or not locks.hold(locks.TELEGRAM_READER, holder):
                stop.wait(IDLE_S)
                continue
            try:
                poll_once()
            except BotError as error:
                stop.wait(error.retry_after if error.kind == RATE_LIMITED else IDLE_S)
                if error.kind == CONFLICT:
                    logger.warning("agent telegram: Telegram refused polling (a webhook is set, or another reader)")
    finally:
        locks.release_names([locks.TELEGRAM_READER], holder)
        connection.close()  # a reader runs in a thread of its own, or a process that ends here


def poll_once(timeout: int = POLL_S) -> int:
    """One ``getUpdates`` from the kept offset: each update recorded, the offset moved past them; how many."""
    offset = TelegramBot.current().offset

    async def make(bot: Any) -> Any:
        return await bot.get_updates(offset=offset or None, timeout=timeout, allowed_updates=ALLOWED)

    received = call(make, timeout=timeout + 10)
    for update in received:
        updates.record(update.to_dict())
        offset = max(offset, update.update_id + 1)
    if received:
        TelegramBot.objects.filter(pk=1).update(offset=offset)
    return len(received)


def drop_webhook() -> None:
    """Polling and a webhook exclude each other: the reader removes a webhook left from webhook mode."""

    async def make(bot: Any) -> Any:
        return await bot.delete_webhook()

    call(make)
