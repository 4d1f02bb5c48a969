"""Cards made the realistic way: a live session's scope through ``execute_as``."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from agent.access import authorize_session
from agent.models import Confirmation, Conversation
from agent.tools import execute_as


@pytest.fixture
def propose(ref: Any, chat: Conversation) -> Callable[..., Confirmation]:
    """``propose(tool_name, args)``: the card the executor makes for a model's write call."""

    def make(tool_name: str, args: dict[str, Any], *, call_id: str = "call_1", conversation: Any = None) -> Any:
        scope = authorize_session(ref, impersonated=False)
        result = execute_as(scope, tool_name, args, via="agent", chat=conversation or chat, call_id=call_id)
        assert result.outcome == "needs_confirmation", result
        return result.confirmation

    return make
