"""A user with many tools: each model call carries the best-ranked within the budget plus
``find_tools``, through the real runner and the scripted model server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent import turns
from agent.access import SessionRef
from agent.models import AIRequest, Turn
from agent.tasks import run_turn
from tests.support.catalogue import declare_catalogue
from tests.support.factories import UserSettingsFactory
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.turns import agent_conf, messages_of, tool_messages, tool_names

pytestmark = pytest.mark.django_db


def run(ref: SessionRef, chat: Any, text: str) -> Turn:
    turn = turns.start(ref, chat.pk, text, impersonated=False)
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    return turn


def tools_bytes(request: dict[str, Any]) -> int:
    return len(json.dumps(request.get("tools") or []))


@pytest.fixture
def hundred(declare: Any) -> list[str]:
    """The user sees the test site's 6 tools and 100 more: 106."""
    return declare_catalogue(declare)


def test_a_user_with_a_hundred_tools_gets_the_relevant_ones_within_the_budget(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, hundred: list[str]
) -> None:
    # given: every definition together is far over the budget
    assert len(json.dumps([{"name": n} for n in hundred])) < 16_000 < 40_000
    # when: a turn of two rounds asks about feedings
    model_server.push(tool_calls(("feeding_list", {"child": 1})), answer("two feedings"))
    run(ref, chat, "How many feedings did the baby have today?")
    # then: each request carries at most 20 tools in at most 16,000 bytes, the right one among them
    for request in model_server.requests:
        names = tool_names(request)
        assert len(names) <= 20 and tools_bytes(request) <= 16_000
        assert "feeding_list" in names and names[-1] == "find_tools"
        assert not {"bath_destroy", "vaccine_create"} & set(names)  # nothing the request gives no word of


def test_the_ranking_reads_the_messages_before_the_latest(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, hundred: list[str]
) -> None:
    model_server.push(answer("Here is the last temperature."), answer("Which one?"))
    run(ref, chat, "What was the temperature this morning?")
    run(ref, chat, "Please delete it")
    names = tool_names(model_server.requests[1])
    assert "temperature_destroy" in names and names.index("temperature_destroy") < names.index("find_tools")


def test_a_russian_user_gets_tools_by_their_translated_titles(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer, hundred: list[str]
) -> None:
    UserSettingsFactory(user=user, language="ru")
    run(ref, chat, "Добавь прививку")
    names = tool_names(model_server.requests[0])
    assert names[0] == "vaccine_create" and len(names) <= 20


def test_a_turn_finds_a_tool_not_offered_with_find_tools_and_runs_it(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    # given: 100 tools that record their runs, and a message that names none of the bath's words
    runs: list[dict[str, Any]] = []
    declare_catalogue(declare, run=lambda ctx, **args: runs.append(args) or {"baths": 2})
    model_server.push(
        tool_calls(("find_tools", {"query": "list baths"})),
        tool_calls(("bath_list", {"child": 1})),
        answer("Two baths."),
    )
    # when
    run(ref, chat, "Keep track of her washing")
    first, second, third = model_server.requests
    # then: the first request did not carry it, find_tools found it, the next round offered it and it ran
    assert "bath_list" not in tool_names(first)
    found = json.loads(tool_messages(second)[0]["content"])["tools"]
    assert found[0]["name"] == "bath_list" and found[0]["title"] == "List baths" and len(found) <= 5
    assert "List the bath" in found[0]["description"]
    assert "bath_list" in tool_names(second) and "bath_list" in tool_names(third)
    assert [(m.tool_name, m.tool_outcome) for m in messages_of(chat) if m.role == "tool"] == [
        ("find_tools", "ok"),
        ("bath_list", "ok"),
    ]
    assert runs == [{"child": 1}]


def test_a_visible_tool_the_model_calls_without_its_offer_runs(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    runs: list[dict[str, Any]] = []
    declare_catalogue(declare, run=lambda ctx, **args: runs.append(args) or {"ok": True})
    model_server.push(tool_calls(("photo_destroy", {"id": 2})), answer("done"))
    run(ref, chat, "How many feedings today?")
    assert "photo_destroy" not in tool_names(model_server.requests[0])
    assert [m.tool_outcome for m in messages_of(chat) if m.role == "tool"] == ["ok"]
    assert runs == [{"id": 2}]


def test_a_tool_the_user_may_not_use_is_never_offered_found_or_run(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any, hundred: list[str]
) -> None:
    runs: list[int] = []
    declare(lambda ctx: runs.append(1) or {}, name="payroll_export", permission="agent.manage_agent")
    model_server.push(
        tool_calls(("find_tools", {"query": "payroll export"}), ("payroll_export", {})),
        answer("no"),
    )
    run(ref, chat, "Export the payroll")
    assert "payroll_export" not in tool_names(model_server.requests[0])
    found, refused = tool_messages(model_server.requests[1])
    assert "payroll" not in found["content"] and "denied" in refused["content"]
    assert runs == []


def test_invalid_find_tools_arguments_go_back_to_the_model(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, hundred: list[str]
) -> None:
    model_server.push(tool_calls(("find_tools", {"query": "bath", "limit": 500})), answer("sorry"))
    run(ref, chat, "baths?")
    assert [m.tool_outcome for m in messages_of(chat) if m.role == "tool"] == ["invalid_arguments"]


def test_a_user_whose_tools_fit_gets_them_all_and_no_find_tools(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("find_tools", {"query": "notes"})), answer("ok"))
    run(ref, chat, "hello")
    names = tool_names(model_server.requests[0])
    assert "notes_search" in names and "notes_wait" in names and "find_tools" not in names
    assert [(m.tool_name, m.tool_outcome) for m in messages_of(chat) if m.role == "tool"] == [("find_tools", "denied")]


def test_tools_over_the_byte_budget_alone_are_ranked_too(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    # given: the test site's 6 tools, within the count but not within a budget of 800 bytes
    with agent_conf(TOOLS_INLINE_BYTES=800):
        run(ref, chat, "search my notes")
    request = model_server.requests[0]
    assert tool_names(request)[0] == "notes_search" and tool_names(request)[-1] == "find_tools"
    assert tools_bytes(request) <= 800


def test_the_journal_row_records_the_tools_offered_and_their_bytes(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, hundred: list[str]
) -> None:
    with agent_conf(MAX_TOOL_ROUNDS=2):
        model_server.push(tool_calls(("feeding_list", {})), answer("ok"))
        run(ref, chat, "feedings today")
    first, last = AIRequest.objects.order_by("created_at")
    sent = model_server.requests[0]
    assert (first.tools_offered, first.tools_bytes) == (len(sent["tools"]), tools_bytes(sent))
    assert 0 < first.tools_bytes <= 16_000
    assert (last.tools_offered, last.tools_bytes) == (0, 0)  # the last round shows none
