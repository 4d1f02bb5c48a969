"""The rounds of a turn, run in this process through ``agent.tasks.run_turn``."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from agent import turns
from agent.access import SessionRef
from agent.conversations import get_conversation
from agent.models import AgentSettings, AIRequest, Confirmation, Message, OffPurposeFlag, Turn
from agent.tasks import run_turn
from tests.support.factories import AIRequestFactory, UserSettingsFactory
from tests.support.model_server import ScriptedModelServer, answer, error, off_purpose, prompt_nonce, tool_calls
from tests.support.turns import agent_conf, messages_of, tool_messages, tool_names

pytestmark = pytest.mark.django_db

NAMELESS = {"id": "call_nameless", "type": "function", "function": {"name": "", "arguments": "{}"}}


def run(ref: SessionRef, chat: Any, text: str = "hello") -> Turn:
    """Start a turn and run it here, to its end."""
    turn = turns.start(ref, chat.pk, text, impersonated=False)
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    return turn


def shape(chat: Any) -> list[tuple[str, str]]:
    """Each stored message as (role, its outcome or notice code)."""
    return [(m.role, m.tool_outcome or m.notice_code) for m in messages_of(chat)]


# -- the user's message, the request ------------------------------------------------


def test_the_users_message_is_stored_first_and_sent_last(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("hi back"))
    turn = turns.start(ref, chat.pk, "hello there", impersonated=False)
    assert messages_of(chat) == []  # a turn that never ran leaves nothing
    run_turn(str(turn.pk))
    stored = messages_of(chat)
    assert [(m.role, m.content) for m in stored] == [("user", "hello there"), ("assistant", "hi back")]
    assert Turn.objects.get(pk=turn.pk).user_message_id == stored[0].pk
    sent = model_server.requests[0]["messages"]
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "hello there"}


def test_the_users_message_is_stored_even_when_the_session_ended_before_the_task(
    session: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    client, ref = session
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    client.logout()
    run_turn(str(turn.pk))
    assert shape(chat) == [("user", ""), ("notice", "session_ended")]
    assert model_server.requests == []


def test_an_endpoint_deleted_between_the_start_and_the_run_ends_the_turn_as_not_configured(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    # given: a turn started on the site's endpoint, which staff delete before a worker takes the turn
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    endpoint.delete()
    # when: the turn runs
    run_turn(str(turn.pk))
    # then: the call is journalled as not configured and the chat is told, not left with a crashed turn
    turn.refresh_from_db()
    assert turn.end_reason != "crashed" and turn.status != Turn.Status.RUNNING
    assert AIRequest.objects.get().error_code == "endpoint_not_configured"
    assert shape(chat)[0] == ("user", "") and shape(chat)[-1][0] == "notice"
    assert model_server.requests == []


def test_the_earlier_chat_goes_before_this_turn(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("first answer"), answer("second answer"))
    run(ref, chat, "first question")
    run(ref, chat, "second question")
    sent = [(m["role"], m["content"]) for m in model_server.requests[1]["messages"][1:]]
    assert sent == [("user", "first question"), ("assistant", "first answer"), ("user", "second question")]


def test_the_system_prompt_carries_site_and_user_instructions_and_the_marker(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    AgentSettings.objects.filter(pk=1).update(system_prompt="SITE-RULE: answer about notes only.")
    user.first_name, user.last_name = "Ada", "Lovelace"
    user.save()
    UserSettingsFactory(user=user, instructions="MINE " + "z" * 5000)
    run(ref, chat)
    prompt = model_server.requests[0]["messages"][0]["content"]
    assert "SITE-RULE: answer about notes only." in prompt
    assert "Ada Lovelace" in prompt and timezone.localdate().isoformat() in prompt
    assert "MINE " + "z" * 3995 in prompt and "z" * 3996 not in prompt  # the user's own, cut to 4,000
    assert "⟦off_purpose: " in prompt and "confirm" in prompt.lower()


def test_the_call_is_attributed_to_the_answer_and_the_turn(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("hi", usage={"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}))
    turn = run(ref, chat)
    reply = messages_of(chat)[-1]
    row = AIRequest.objects.get()
    assert (row.source, row.task, row.user_id, row.status) == ("agent", "agent.chat", user.pk, "success")
    assert row.attribution == {"message": str(reply.pk), "turn": str(turn.pk)}
    assert row.admission == turn.admission
    assert row.captured is None  # CAPTURE_CONTENT is off by default
    assert reply.ai_request_id == row.pk
    assert (reply.model, reply.input_tokens, reply.output_tokens) == ("scripted-model", 1000, 500)
    assert reply.cost_usd == Decimal("0.006") == row.cost_usd  # 1000 × 2 + 500 × 8 per million
    assert reply.latency_ms == row.latency_ms


def test_content_is_captured_only_when_capture_content_is_on(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    with agent_conf(CAPTURE_CONTENT=True):
        run(ref, chat, "capture me")
    captured = AIRequest.objects.get().captured
    assert captured["messages"][-1] == {"role": "user", "content": "capture me"} and captured["answer"] == "ok"


# -- tools shown, tools run --------------------------------------------------------


def test_tools_are_listed_anew_each_round_and_only_this_rounds_reach_the_executor(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    # given: a tool that takes the user's right to see notes away when it runs
    def revoke(ctx: Any) -> dict[str, str]:
        ctx.user.user_permissions.remove(Permission.objects.get(codename="view_note"))
        return {"status": "done"}

    declare(revoke, name="revoke_view")
    model_server.push(
        tool_calls(("revoke_view", {})),
        tool_calls(("notes_search", {"query": "milk"})),
        answer("done"),
    )
    run(ref, chat)
    first, second, _third = model_server.requests
    assert "notes_search" in tool_names(first)
    assert "notes_search" not in tool_names(second) and "revoke_view" in tool_names(second)
    search = [m for m in messages_of(chat) if m.tool_name == "notes_search"]
    assert [(m.tool_outcome, m.tool_result["error"]) for m in search] == [("denied", "denied")]


def test_a_tool_not_shown_never_runs(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    runs: list[int] = []
    declare(lambda ctx: runs.append(1), name="staff_only", permission="agent.manage_agent")
    model_server.push(tool_calls(("staff_only", {}), ("no_such_tool", {})), answer("ok"))
    run(ref, chat)
    assert "staff_only" not in tool_names(model_server.requests[0])
    assert [(m.tool_name, m.tool_outcome) for m in messages_of(chat) if m.role == "tool"] == [
        ("staff_only", "denied"),
        ("no_such_tool", "denied"),
    ]
    assert runs == []


def test_the_eleventh_call_of_a_round_is_denied(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    model_server.push(tool_calls(*[("count_me", {"n": i}) for i in range(11)]), answer("ok"))
    run(ref, chat)
    outcomes = [m.tool_outcome for m in messages_of(chat) if m.role == "tool"]
    assert outcomes == ["ok"] * 10 + ["denied"]
    assert [r["n"] for r in counter] == list(range(10))


def test_a_read_result_goes_back_to_the_model(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    model_server.push(tool_calls(("count_me", {"n": 1}, "call_a")), answer("ok"))
    run(ref, chat)
    sent = model_server.requests[1]["messages"]
    assert sent[-2]["role"] == "assistant" and sent[-2]["tool_calls"][0]["id"] == "call_a"
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_a", "content": json.dumps({"count": 1})}


def test_a_tool_that_raises_is_an_error_result_with_its_class_name_only(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    def broken(ctx: Any) -> None:
        raise LookupError("SECRET-IN-THE-EXCEPTION")

    declare(broken, name="broken")
    model_server.push(tool_calls(("broken", {})), answer("sorry"))
    turn = run(ref, chat)
    stored = next(m for m in messages_of(chat) if m.role == "tool")
    assert (stored.tool_outcome, stored.tool_result) == ("error", {"error": "LookupError"})
    assert "SECRET" not in json.dumps(model_server.requests[1]["messages"])
    assert turn.status == Turn.Status.FINISHED


def test_invalid_arguments_go_back_to_the_model_to_correct(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_calls(("notes_read", {"note_id": "seven"}), ("notes_read", "{not json")),
        answer("sorry"),
    )
    run(ref, chat)
    tools = [m for m in messages_of(chat) if m.role == "tool"]
    assert [m.tool_outcome for m in tools] == ["invalid_arguments", "invalid_arguments"]
    returned = tool_messages(model_server.requests[1])
    assert len(returned) == 2 and all("invalid_arguments" in m["content"] for m in returned)
    assert "note_id" in returned[0]["content"]


def test_a_result_over_tool_result_chars_is_cut_and_flagged(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    declare(lambda ctx: {"text": "x" * 500}, name="big")
    model_server.push(tool_calls(("big", {})), answer("ok"))
    with agent_conf(TOOL_RESULT_CHARS=100):
        run(ref, chat)
    stored = next(m for m in messages_of(chat) if m.role == "tool")
    assert stored.tool_result_truncated is True
    assert stored.tool_result == json.dumps({"text": "x" * 500})[:100]
    assert tool_messages(model_server.requests[1])[0]["content"] == stored.tool_result


def test_a_result_within_tool_result_chars_is_kept_whole(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    declare(lambda ctx: {"text": "x" * 10}, name="small")
    model_server.push(tool_calls(("small", {})), answer("ok"))
    with agent_conf(TOOL_RESULT_CHARS=100):
        run(ref, chat)
    stored = next(m for m in messages_of(chat) if m.role == "tool")
    assert stored.tool_result == {"text": "x" * 10} and stored.tool_result_truncated is False


def test_older_results_beyond_ten_times_tool_result_chars_are_sent_as_a_stub(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    # given: results of 100 characters each (cut), a budget of 1,000
    declare(
        lambda ctx, n=0: "y" * 300, name="big", parameters={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    model_server.push(
        tool_calls(*[("big", {"n": i}, f"r1_{i}") for i in range(10)]),  # round 1: 1,000 characters
        tool_calls(("big", {"n": 10}, "r2_0")),  # round 2: 100 more
        answer("done"),
    )
    with agent_conf(TOOL_RESULT_CHARS=100):
        run(ref, chat)
    # then: after round 1, its results fill the budget exactly and go whole
    assert [len(m["content"]) for m in tool_messages(model_server.requests[1])] == [100] * 10
    # and after round 2, its result and 9 older ones fit; the oldest is the stub
    third = tool_messages(model_server.requests[2])
    assert [m["tool_call_id"] for m in third] == [f"r1_{i}" for i in range(10)] + ["r2_0"]
    assert third[0]["content"] == "[left out: an earlier result of this turn, too long to send again]"
    assert [len(m["content"]) for m in third[1:]] == [100] * 10
    kept = next(m for m in messages_of(chat) if m.tool_call_id == "r1_0")
    assert kept.tool_result == '"' + "y" * 99  # the database keeps what was stored


def test_nameless_tool_calls_are_dropped(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    reply = tool_calls(("count_me", {"n": 1}, "call_named"))
    reply["tool_calls"].insert(0, NAMELESS)
    model_server.push(reply, answer("ok"))
    run(ref, chat)
    stored = messages_of(chat)
    asked = next(m for m in stored if m.role == "assistant" and m.tool_calls)
    assert [c["id"] for c in asked.tool_calls] == ["call_named"]
    assert [m.tool_call_id for m in stored if m.role == "tool"] == ["call_named"]
    sent = model_server.requests[1]["messages"]
    assert [c["id"] for c in sent[-2]["tool_calls"]] == ["call_named"]
    assert [m["tool_call_id"] for m in tool_messages(model_server.requests[1])] == ["call_named"]


@pytest.mark.parametrize(
    "reply",
    [answer(""), answer("  \n "), {"content": "", "tool_calls": [NAMELESS]}],
    ids=["empty", "blank", "nameless_call_only"],
)
def test_an_answer_with_no_text_and_no_call_is_an_empty_answer_notice(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, reply: dict[str, Any]
) -> None:
    model_server.push(reply)
    turn = run(ref, chat)
    assert shape(chat) == [("user", ""), ("notice", "empty_answer")]
    assert turn.status == Turn.Status.FINISHED
    assert len(model_server.requests) == 1


def test_an_off_purpose_marker_at_the_very_end_is_cut_and_flags_once(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    model_server.push(
        tool_calls(("count_me", {}), content="Let me look. " + off_purpose("weather")),
        answer("Not my thing. " + off_purpose("weather again") + " \n\n"),
    )
    turn = run(ref, chat, "what's the weather?")
    answers = [m.content for m in messages_of(chat) if m.role == "assistant"]
    assert answers == ["Let me look.", "Not my thing."]
    flag = OffPurposeFlag.objects.get()
    assert (flag.user_id, flag.turn_ref, flag.reason) == (user.pk, turn.pk, "weather")
    assert "⟦" not in model_server.requests[1]["messages"][-2]["content"]


@pytest.mark.parametrize(
    "marker",
    ["⟦off_purpose: weather⟧", "⟦off_purpose: 0123456789abcdef weather⟧", "⟦off_purpose:⟧"],
    ids=["no nonce", "another nonce", "empty"],
)
def test_a_marker_at_the_end_without_the_turns_nonce_is_cut_and_flags_nothing(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, marker: str
) -> None:
    # given: a model that copies a marker a file or a tool result wrote, without the prompt's nonce
    model_server.push(answer("Here is the summary. " + marker))
    run(ref, chat)
    assert messages_of(chat)[-1].content == "Here is the summary."
    assert not OffPurposeFlag.objects.exists()


def test_each_turn_gets_a_nonce_of_its_own(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    run(ref, chat)
    run(ref, chat)
    first, second = (prompt_nonce(body) for body in model_server.requests)
    assert first and second and first != second


@pytest.mark.parametrize(
    "text",
    [
        "⟦off_purpose: weather⟧ is what the model might write first",
        "Two markers ⟦off_purpose: a⟧ here ⟦off_purpose: b⟧ and text after",
        "An unclosed ⟦off_purpose: weather",
    ],
)
def test_a_marker_anywhere_else_stays_and_flags_nothing(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, text: str
) -> None:
    model_server.push(answer(text))
    run(ref, chat)
    assert messages_of(chat)[-1].content == text
    assert not OffPurposeFlag.objects.exists()


def test_the_last_round_shows_no_tools_and_calls_still_made_end_with_max_rounds(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    model_server.push(tool_calls(("count_me", {"n": 1})), tool_calls(("count_me", {"n": 2})))
    with agent_conf(MAX_TOOL_ROUNDS=2):
        turn = run(ref, chat)
    first, last = model_server.requests
    assert "count_me" in tool_names(first) and "tools" not in last
    assert shape(chat) == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "ok"),
        ("assistant", ""),
        ("tool", "denied"),
        ("notice", "max_rounds"),
    ]
    assert len(counter) == 1  # the last round's call did not run
    assert turn.status == Turn.Status.FINISHED


def test_an_answer_in_the_last_round_ends_without_max_rounds(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    model_server.push(tool_calls(("count_me", {})), answer("from what I have"))
    with agent_conf(MAX_TOOL_ROUNDS=2):
        run(ref, chat)
    assert shape(chat)[-1] == ("assistant", "")


# -- a write -----------------------------------------------------------------------


def test_a_write_becomes_a_card_and_ends_the_turn(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"}, "call_w")), answer("Done!"))
    turn = run(ref, chat)
    confirmation = Confirmation.objects.get()
    asked, proposal = messages_of(chat)[1:]
    assert (proposal.tool_outcome, proposal.confirmation_id, proposal.assistant_message_id) == (
        "needs_confirmation",
        confirmation.pk,
        asked.pk,
    )
    assert proposal.tool_result == {"status": "confirmation_required", "confirmation_id": str(confirmation.pk)}
    assert (
        confirmation.user_id,
        confirmation.conversation_id,
        confirmation.turn_id,
        confirmation.call_id,
        confirmation.arguments,
        confirmation.status,
    ) == (
        user.pk,
        chat.pk,
        turn.pk,
        "call_w",
        {"title": "Buy milk"},
        "waiting",
    )
    assert len(model_server.requests) == 1  # no answer can claim the change was made
    assert turn.status == Turn.Status.FINISHED


def test_a_read_after_a_waiting_write_is_held_and_the_turn_ends_after_the_round(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "a"}), ("count_me", {})), answer("made it"))
    run(ref, chat)
    tools = [m for m in messages_of(chat) if m.role == "tool"]
    assert [m.tool_outcome for m in tools] == ["needs_confirmation", "denied"]
    assert "held for confirmation" in tools[1].tool_result["message"].lower()
    assert counter == [] and len(model_server.requests) == 1


def test_a_second_write_in_one_answer_is_denied(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "a"}), ("notes_create", {"title": "b"})))
    run(ref, chat)
    tools = [m for m in messages_of(chat) if m.role == "tool"]
    assert [m.tool_outcome for m in tools] == ["needs_confirmation", "denied"]
    assert "confirm the earlier change first" in tools[1].tool_result["message"].lower()
    assert list(Confirmation.objects.values_list("arguments", flat=True)) == [{"title": "a"}]


def test_a_write_whose_call_id_another_call_shares_is_denied(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    model_server.push(tool_calls(("count_me", {}, "same"), ("notes_create", {"title": "a"}, "same")), answer("ok"))
    run(ref, chat)
    assert [m.tool_outcome for m in messages_of(chat) if m.role == "tool"] == ["ok", "denied"]
    assert not Confirmation.objects.exists()


def test_a_write_like_a_card_that_still_waits_is_denied(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_calls(("notes_create", {"title": "a"})), tool_calls(("notes_create", {"title": "a"})), answer("ok")
    )
    run(ref, chat, "make a note")
    run(ref, chat, "make it again")
    last = [m for m in messages_of(chat) if m.role == "tool"][-1]
    assert last.tool_outcome == "denied"
    assert "already waiting for confirmation" in last.tool_result["message"].lower()
    assert Confirmation.objects.count() == 1


def test_a_client_sees_no_result_or_arguments_of_the_turns_tools(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    declare(
        lambda ctx, q="": {"value": "TOP-SECRET-RESULT"},
        name="secret_read",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    model_server.push(tool_calls(("secret_read", {"q": "SECRET-ARGUMENT"})), answer("ok"))
    run(ref, chat)
    seen = json.dumps(get_conversation(ref, chat.pk, impersonated=False), default=str)
    assert "TOP-SECRET-RESULT" not in seen and "SECRET-ARGUMENT" not in seen


# -- failures ------------------------------------------------------------------------


def test_a_model_error_is_a_model_failed_notice_with_its_code_and_no_provider_text(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(error(429, message="PROVIDER-TEXT-acct-4711"))
    turn = run(ref, chat)
    notice = messages_of(chat)[-1]
    assert (notice.role, notice.notice_code, notice.notice_params["code"]) == ("notice", "model_failed", "rate_limited")
    assert "PROVIDER-TEXT" not in json.dumps([notice.content, notice.notice_params])
    assert (turn.status, turn.end_reason) == ("failed", "model_failed")
    assert Message.objects.filter(role="notice").count() == 1  # one notice, written in one place


def test_a_server_error_keeps_its_http_status(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(error(503))
    run(ref, chat)
    assert messages_of(chat)[-1].notice_params == {"code": "api_error", "status": 503}


def test_the_budget_is_checked_again_before_each_model_call(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    def spend(ctx: Any) -> str:
        AIRequestFactory(user=ctx.user, source="x", task="x", status="success", cost_usd=Decimal(5))
        return "spent"

    declare(spend, name="spend")
    AgentSettings.objects.filter(pk=1).update(daily_cost_per_user=Decimal(1))
    model_server.push(tool_calls(("spend", {})), answer("never"))
    run(ref, chat)
    notice = messages_of(chat)[-1]
    assert {k: notice.notice_params[k] for k in ("code", "limit", "cap")} == {
        "code": "budget_exceeded",
        "limit": "cost_per_user",
        "cap": "1.0000",
    }
    assert len(model_server.requests) == 1


# -- the next turn's history -------------------------------------------------------------


def request_text(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"], ensure_ascii=False)


def test_earlier_turns_tool_calls_and_results_are_not_sent_again(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    declare(lambda ctx: {"value": "OLD-SECRET-RESULT"}, name="secret_read")
    model_server.push(tool_calls(("secret_read", {})), answer("first answer"), answer("second answer"))
    run(ref, chat, "first")
    run(ref, chat, "second")
    later = model_server.requests[2]
    assert "OLD-SECRET-RESULT" not in request_text(later)
    assert [m["role"] for m in later["messages"]] == ["system", "user", "assistant", "user"]


def test_a_confirmed_card_reaches_the_next_turn_as_its_phrase_in_the_users_language(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    from agent.confirmations import confirm

    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})), answer("Готово."))
    run(ref, chat, "make a note")
    confirm(ref, Confirmation.objects.get().pk, impersonated=False)
    UserSettingsFactory(user=user, language="ru")
    run(ref, chat, "done?")
    sent = model_server.requests[1]["messages"]
    assert {"role": "user", "content": "[подтверждение] выполнено: notes_create"} in sent
    assert "Buy milk" not in request_text(model_server.requests[1])


def test_a_card_that_ran_out_is_settled_before_the_chat_is_read(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "a"})), answer("ok"))
    run(ref, chat, "make a note")
    Confirmation.objects.update(expires_at=timezone.now())
    run(ref, chat, "and now?")
    text = request_text(model_server.requests[1])
    assert "[confirmation] expired: notes_create" in text and "[confirmation] waiting" not in text
    assert shape(chat)[-3:] == [("notice", "confirmation_expired"), ("user", ""), ("assistant", "")]


def test_a_model_marked_without_tools_is_sent_none_and_answers_plainly(ref, chat, endpoint, model_server):
    endpoint.supports_tools = False
    endpoint.save()
    model_server.push(answer("a plain answer"))
    turn = run(ref, chat)
    assert "tools" not in model_server.requests[0]
    assert turn.status == "finished" and shape(chat) == [("user", ""), ("assistant", "")]
