"""Rights lost while the model thinks: no tool step starts with them."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from agent import turns
from agent.models import AgentSettings, Message
from agent.tasks import run_turn
from tests.notes.models import Note
from tests.support.model_server import answer, tool_calls
from tests.support.turns import messages_of

pytestmark = pytest.mark.django_db(transaction=True)


def _during_the_model_call(model_server: Any, action: Any) -> threading.Thread:
    """Run ``action`` once the model has the request (its answer is scripted to take a second)."""
    thread = threading.Thread(target=lambda: model_server.received.wait(10) and action())
    thread.start()
    return thread


def test_a_permission_lost_during_the_model_call_denies_that_tool(ref, chat, user, endpoint, model_server):
    # given a note and a model that takes a second to ask for a search
    Note.objects.create(owner=user, title="secret", body="x")
    model_server.push(tool_calls(("notes_search", {"query": "secret"}), delay=1), answer("done"))
    timer = _during_the_model_call(
        model_server, lambda: user.user_permissions.remove(Permission.objects.get(codename="view_note"))
    )
    # when the turn runs and the permission goes while the model thinks
    turn = turns.start(ref, chat.pk, "find my secret note", impersonated=False)
    run_turn(str(turn.pk))
    timer.join()
    # then the search was denied, not run with the right the user no longer has
    tool = next(m for m in messages_of(chat) if m.role == Message.Role.TOOL)
    assert tool.tool_outcome == "denied" and "secret" not in str(tool.tool_result)


def test_the_assistant_switched_off_during_the_model_call_runs_no_tool(ref, chat, user, endpoint, model_server):
    model_server.push(tool_calls(("notes_search", {"query": "x"}), delay=1), answer("never"))
    timer = _during_the_model_call(model_server, lambda: AgentSettings.objects.filter(pk=1).update(enabled=False))
    turn = turns.start(ref, chat.pk, "search", impersonated=False)
    run_turn(str(turn.pk))
    timer.join()
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("failed", "forbidden")
    assert not [m for m in messages_of(chat) if m.role == Message.Role.TOOL]
    assert len(model_server.requests) == 1


def test_a_budget_refusal_notice_names_no_journal_row(ref, chat, user, endpoint, model_server, settings):
    # given a turn admitted under a cap that the first call's cost then reaches
    settings.AGENT = {**settings.AGENT, "DAILY_COST_PER_USER": 0.0001}
    costly = {"prompt_tokens": 10**6, "completion_tokens": 0, "total_tokens": 10**6}
    model_server.push(tool_calls(("notes_search", {"query": "x"})) | {"usage": costly}, answer("never"))
    turn = turns.start(ref, chat.pk, "search", impersonated=False)
    run_turn(str(turn.pk))
    notice = messages_of(chat)[-1]
    assert notice.notice_code == "model_failed" and notice.notice_params["code"] == "budget_exceeded"
    assert notice.ai_request_id is None and len(model_server.requests) == 1


# -- a revocation while the answer's tool calls run: none of the rest starts -------


def _logout(session: Any, user: Any) -> None:
    session[0].logout()


def _change_password(session: Any, user: Any) -> None:
    user.set_password("a-new-password")
    user.save()


def _lose_use_agent(session: Any, user: Any) -> None:
    Permission.objects.get(codename="use_agent").user_set.remove(user)


def _deactivate(session: Any, user: Any) -> None:
    type(user).objects.filter(pk=user.pk).update(is_active=False)


def _mark_impersonated(session: Any, user: Any) -> None:
    store = session[0].session  # the same session, as django-hijack marks it
    store["hijack_history"] = ["1"]
    store.save()


@pytest.mark.parametrize(
    ("revoke", "reason"),
    [
        (_mark_impersonated, "session_ended"),
        (_logout, "session_ended"),
        (_change_password, "session_ended"),
        (_lose_use_agent, "forbidden"),
        (_deactivate, "session_ended"),
    ],
    ids=["impersonated", "logout", "password", "permission", "deactivated"],
)
def test_a_revocation_during_the_first_tool_call_starts_none_of_the_rest(
    session, chat, user, endpoint, model_server, declare, revoke, reason
):
    # given an answer with three slow reads, and a revocation while the first one runs
    started: list[int] = []

    def slow_read(ctx: Any, n: int) -> dict[str, Any]:
        started.append(n)
        if n == 1:
            revoke(session, user)
        return {"n": n}

    declare(slow_read, name="slow_read", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    model_server.push(tool_calls(("slow_read", {"n": 1}), ("slow_read", {"n": 2}), ("slow_read", {"n": 3})))
    turn = turns.start(session[1], chat.pk, "read three", impersonated=False)
    # when the turn runs
    run_turn(str(turn.pk))
    # then the first call's result is kept, and neither tool nor model step started after it
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("failed", reason)
    assert started == [1] and len(model_server.requests) == 1
    assert [m.tool_outcome for m in messages_of(chat) if m.role == Message.Role.TOOL] == ["ok"]


def test_the_check_before_each_tool_call_is_one_statement(ref, chat, user, endpoint, model_server, declare):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agent.models import Turn
    from agent.turns.fenced import Fence

    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING)
    fence = Fence(Turn.objects.select_related("endpoint", "conversation", "user").get(pk=turn.pk))
    fence.verify()  # the tool registry and content types are warm, as in a running worker
    with CaptureQueriesContext(connection) as queries:
        scope = fence.verify()
    assert len(queries) == 1
    assert scope.has_perm("notes.view_note") and not scope.has_perm("notes.delete_note")
