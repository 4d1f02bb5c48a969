"""Telegram in the tests: the fake Bot API as the site's bot, users linked through the real flow,
updates handled as the site handles them."""

from __future__ import annotations

from typing import Any

from agent.access import SessionRef
from agent.models import TelegramLink
from agent.telegram import link_token, updates

from .telegram_api import FakeBotApi
from .waiting import wait_until


def handled(update: dict[str, Any]) -> None:
    """Record an update and handle it here, now (as the webhook's view and the update's task would)."""
    updates.record(update)
    updates.handle(update["update_id"])


def connect(api: FakeBotApi, ref: SessionRef, chat_id: int, *, inline: bool = True) -> TelegramLink:
    """Link ``chat_id`` to the session's user by the page's token and ``/start``; ``inline=False`` leaves
    the update to a worker."""
    token = link_token(ref, impersonated=False)
    update = api.says(chat_id, f"/start {token}")
    if inline:
        handled(update)
    else:
        updates.record(update)
    return wait_until(lambda: TelegramLink.objects.filter(chat_id=chat_id, revoked_at=None).first(), what="the link")
