"""A model's tool call cannot crash its turn, nor make a card too large: arguments nested deeper than
``MAX_TOOL_ARGUMENT_DEPTH`` or longer than ``TOOL_RESULT_CHARS`` are ``invalid_arguments``, stored as
any refusal, and the turn goes on to the model's next answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent import turns
from agent.access import SessionRef
from agent.models import Confirmation, Turn
from agent.tasks import run_turn
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.turns import agent_conf, messages_of, tool_messages

pytestmark = pytest.mark.django_db(transaction=True)  # the stream watcher checks the session from its own thread


def run(ref: SessionRef, chat: Any) -> Turn:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    return turn


def nested(depth: int) -> str:
    """``{"note_id": [[...]]}`` with ``depth`` levels in all, as JSON text."""
    return '{"note_id": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("depth", [33, 400, 3000])
def test_a_call_nested_too_deep_is_invalid_arguments_and_the_turn_goes_on(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, depth: int
) -> None:
    model_server.push(tool_calls(("notes_read", nested(depth))), answer("I could not read it."))

    turn = run(ref, chat)

    assert turn.status == Turn.Status.FINISHED
    (stored,) = [m for m in messages_of(chat) if m.role == "tool"]
    assert stored.tool_outcome == "invalid_arguments"
    assert stored.tool_result == {"error": "invalid_arguments", "details": ["arguments nest deeper than 32 levels"]}
    assert "invalid_arguments" in tool_messages(model_server.requests[1])[0]["content"]
    assert messages_of(chat)[-1].content == "I could not read it."


def test_a_call_nested_as_deep_as_allowed_is_checked_as_any_other(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_read", nested(32))), answer("ok"))
    run(ref, chat)
    (stored,) = [m for m in messages_of(chat) if m.role == "tool"]
    assert stored.tool_outcome == "invalid_arguments"
    assert "nest deeper" not in json.dumps(stored.tool_result)  # the schema's own refusal: not an integer


def test_an_oversized_write_never_makes_a_card(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_calls(("notes_create", {"title": "big", "body": "x" * 2_000_000}, "call_big")), answer("Too long, sorry.")
    )

    turn = run(ref, chat)

    assert turn.status == Turn.Status.FINISHED
    assert not Confirmation.objects.exists()
    (stored,) = [m for m in messages_of(chat) if m.role == "tool"]
    assert (stored.tool_outcome, stored.tool_result) == (
        "invalid_arguments",
        {"error": "invalid_arguments", "details": ["arguments are longer than 8000 characters"]},
    )
    assert messages_of(chat)[-1].content == "Too long, sorry."


def test_a_write_just_within_the_size_makes_its_card(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    with agent_conf(TOOL_RESULT_CHARS=200):
        arguments = {"title": "fits", "body": "x" * 150}
        assert len(json.dumps(arguments)) <= 200
        model_server.push(tool_calls(("notes_create", arguments)), answer("unused"))
        run(ref, chat)
    assert Confirmation.objects.get().arguments == arguments
