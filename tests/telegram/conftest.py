"""The fake Bot API for every Telegram test, and the site's bot pointed at it."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.support.sessions import grant
from tests.support.telegram_api import FakeBotApi


@pytest.fixture
def bot_api(settings: Any) -> Iterator[FakeBotApi]:
    api = FakeBotApi()
    api.start()
    settings.AGENT = {**settings.AGENT, "TELEGRAM": api.settings()}
    yield api
    api.stop()


@pytest.fixture
def user(make_user: Any) -> Any:
    """A user who may use the assistant in Telegram and write notes."""
    return make_user("agent.use_telegram", "notes.view_note", "notes.add_note", "notes.change_note")


@pytest.fixture
def no_telegram_user(make_user: Any) -> Any:
    return grant(make_user("notes.view_note"), "agent.use_agent")
