"""The turn loop's rows and requests as tests read them, and settings overrides of ``AGENT``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.test import override_settings

from agent.models import Conversation, Message, Turn

from .waiting import wait_until

WORDS = " ".join(f"word{n}" for n in range(40))
"""A long answer of forty distinct words, for streams that must be cut somewhere recognisable."""


def agent_conf(**changes: Any) -> override_settings:
    """``override_settings`` for some keys of ``AGENT``, keeping the test settings' others."""
    return override_settings(AGENT={**settings.AGENT, **changes})


def messages_of(chat: Any) -> list[Message]:
    """The chat's full rows, oldest first (what the runner stored, not what a client sees)."""
    return list(Message.objects.filter(conversation_id=getattr(chat, "pk", chat)).order_by("seq"))


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool`` entries of one request body the model received."""
    return [m for m in request["messages"] if m.get("role") == "tool"]


def tool_names(request: dict[str, Any]) -> list[str]:
    """The names of the tools a request showed the model."""
    return [t["function"]["name"] for t in request.get("tools") or []]


def wait_ended(turn: Turn, timeout: float = 15) -> Turn:
    """The turn's row once it is no longer queued or running."""
    wait_until(
        lambda: Turn.objects.filter(pk=turn.pk).exclude(status__in=Turn.LIVE).exists(), timeout, "the turn to end"
    )
    return Turn.objects.get(pk=turn.pk)


def one_active_line(chat: Any) -> list[Message]:
    """The chat's active line, checked to be one path: each message's parent is the one before it
    on the line, and the chat's line end is the last; the line, oldest first."""
    line = list(Message.objects.filter(conversation_id=chat.pk, active=True).order_by("seq"))
    parents = [m.parent_id for m in line]
    assert parents == [None, *[m.pk for m in line[:-1]]], "the active line is not one path"
    assert Conversation.objects.get(pk=chat.pk).line_end == (line[-1].pk if line else None)
    return line
