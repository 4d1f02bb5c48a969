"""Fixtures of the events tests: someone else's chat, a channel layer of each test's own, the checks' clock."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from agent.conversations import append_message
from agent.models import Conversation, Message
from agent.web.shared_reads import CLOCK, SCOPE_FRESH_S
from tests.support.factories import ConversationFactory


@pytest.fixture
def others_chat(db: Any) -> Conversation:
    row = ConversationFactory()
    append_message(row.pk, role=Message.Role.USER, content="someone else's words")
    return Conversation.objects.get(pk=row.pk)


@pytest.fixture(autouse=True)
def _a_channel_layer_per_test() -> Any:
    """Each test runs on its own event loop, and channels-redis keeps per-channel locks bound to one loop."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def stale_checks(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Make every scope check and message read so far older than a tab may use, by moving the process's
    freshness clock on (back where it was after the test) instead of sleeping."""
    monkeypatch.setattr(CLOCK, "skipped", CLOCK.skipped)
    return lambda: CLOCK.skip(SCOPE_FRESH_S + 0.1)
