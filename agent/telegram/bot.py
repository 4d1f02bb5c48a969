"""The site's bot: its settings, the Bot API reached through python-telegram-bot, and its health.

python-telegram-bot (``django-agent[telegram]``) is imported here only, and only when a call is
made, so a site without Telegram never needs it. Its ``Bot`` is asynchronous; each process keeps one,
on an event loop thread of its own, and the rest of the app calls it synchronously through ``call``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Awaitable, Callable, TypeVar

from django.db.models import F
from django.utils import timezone

from ..core.conf import agent_settings
from ..models import TelegramBot

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_BASE_URL = "https://api.telegram.org"
CALL_TIMEOUT_S = 30.0
MESSAGE_LIMIT = 4096
"""Telegram's most characters in one message."""


@dataclass(frozen=True)
class Config:
    """``AGENT["TELEGRAM"]`` as the app reads it."""

    token: str
    mode: str
    secret: str
    username: str
    base_url: str

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/bot"

    @property
    def file_url(self) -> str:
        return f"{self.base_url}/file/bot"


def config() -> Config | None:
    """The bot's settings, or None when Telegram is off (no ``AGENT["TELEGRAM"]``, or no token)."""
    raw = agent_settings.TELEGRAM
    if not raw:
        return None
    token = raw.get("TOKEN") or os.environ.get(raw.get("TOKEN_ENV") or "", "")
    if not token:
        return None
    return Config(
        token=token,
        mode=raw.get("MODE", "webhook"),
        secret=raw.get("SECRET") or "",
        username=str(raw.get("BOT_USERNAME") or "").lstrip("@"),
        base_url=str(raw.get("BASE_URL") or DEFAULT_BASE_URL).rstrip("/"),
    )


def enabled() -> bool:
    return config() is not None


class BotError(Exception):
    """A Bot API call that did not go through; ``kind`` names why, never with Telegram's text."""

    def __init__(self, kind: str, retry_after: float = 0.0) -> None:
        super().__init__(kind)
        self.kind = kind
        self.retry_after = retry_after


RATE_LIMITED, UNCHANGED, GONE, CONFLICT, UNREACHABLE, REFUSED = (
    "rate_limited",  # 429: wait ``retry_after`` seconds
    "unchanged",  # an edit to the text a message already has
    "gone",  # the chat blocked the bot, or the message is no longer there
    "conflict",  # 409: another reader polls, or a webhook is set
    "unreachable",  # the network, or a time-out
    "refused",  # any other refusal of the request
)


def call(make: Callable[[Any], Awaitable[T]], *, timeout: float = CALL_TIMEOUT_S) -> T:
    """Run ``make(bot)`` (a coroutine of python-telegram-bot's ``Bot``) and return its result.

    Failures come out as ``BotError`` and are counted on the health page.
    """
    settings = config()
    if settings is None:
        raise BotError(REFUSED)
    future = asyncio.run_coroutine_threadsafe(_run(settings, make), _loop())
    try:
        return future.result(timeout + 5)
    except BotError as error:
        if error.kind not in (UNCHANGED, GONE):
            note_error(error.kind)
        raise
    except TimeoutError:
        future.cancel()
        note_error(UNREACHABLE)
        raise BotError(UNREACHABLE) from None


async def _run(settings: Config, make: Callable[[Any], Awaitable[T]]) -> T:
    from telegram import error as tg

    try:
        return await make(_bot(settings))
    except tg.RetryAfter as limited:
        with warnings.catch_warnings():  # the attribute's type changes in a later release: both are read
            warnings.simplefilter("ignore")
            wait = limited.retry_after
        seconds = wait.total_seconds() if isinstance(wait, timedelta) else float(wait)
        raise BotError(RATE_LIMITED, retry_after=seconds) from None
    except tg.Forbidden:
        raise BotError(GONE) from None
    except tg.Conflict:
        raise BotError(CONFLICT) from None
    except tg.BadRequest as bad:
        text = str(bad).lower()
        if "not modified" in text:
            raise BotError(UNCHANGED) from None
        if "not found" in text or "can't be edited" in text or "can't be deleted" in text:
            raise BotError(GONE) from None
        raise BotError(REFUSED) from None
    except (tg.TimedOut, tg.NetworkError):
        raise BotError(UNREACHABLE) from None
    except tg.TelegramError:
        raise BotError(REFUSED) from None


_loop_lock = threading.Lock()
_bots: dict[Config, Any] = {}
_own_loop: tuple[int, asyncio.AbstractEventLoop] | None = None  # the process that started it, and the loop


def _loop() -> asyncio.AbstractEventLoop:
    """The process's loop for Bot API calls, started on first use (in a forked worker too)."""
    global _own_loop
    with _loop_lock:
        if _own_loop is None or _own_loop[0] != os.getpid() or _own_loop[1].is_closed():
            loop = asyncio.new_event_loop()
            _bots.clear()  # a bot's connections belong to the loop it first used
            threading.Thread(target=loop.run_forever, name="agent-telegram", daemon=True).start()
            _own_loop = (os.getpid(), loop)
        return _own_loop[1]


def _bot(settings: Config) -> Any:
    """One ``Bot`` per settings per process, on the loop it runs on (its connection pool is kept)."""
    from telegram import Bot
    from telegram.request import HTTPXRequest

    bot = _bots.get(settings)
    if bot is None:
        long_poll = HTTPXRequest(connection_pool_size=1, read_timeout=CALL_TIMEOUT_S)
        bot = _bots[settings] = Bot(
            settings.token,
            base_url=settings.api_url,
            base_file_url=settings.file_url,
            request=HTTPXRequest(connection_pool_size=8),
            get_updates_request=long_poll,
        )
    return bot


def note_update() -> None:
    """An update came: the health page shows when the last one did."""
    TelegramBot.current()
    TelegramBot.objects.filter(pk=1).update(last_update_at=timezone.now())


def note_error(kind: str) -> None:
    """A call failed: counted, with its kind and time, for the health page (never Telegram's text)."""
    try:
        TelegramBot.current()
        TelegramBot.objects.filter(pk=1).update(last_error_at=timezone.now(), last_error=kind, errors=F("errors") + 1)
    except Exception:  # the health record never breaks what it records
        logger.exception("agent telegram: could not record a failure")
    logger.warning("agent telegram: a Bot API call failed (%s)", kind)
