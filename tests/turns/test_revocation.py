"""Rights lost while the model thinks: no tool step starts with them (SPEC §14, §15)."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from agent import turns
from agent.models import AgentSettings, Message
from agent.tasks import run_turn
from tests.notes.models import Note
from tests.model_server import answer, tool_calls

from .conftest import messages_of

pytestmark = pytest.mark.django_db(transaction=True)


def _during_the_model_call(action: Any) -> threading.Timer:
    timer = threading.Timer(0.3, action)
    timer.start()
    return timer


def test_a_permission_lost_during_the_model_call_denies_that_tool(ref, chat, user, endpoint, model_server):
    # given a note and a model that takes a second to ask for a search
    Note.objects.create(owner=user, title="secret", body="x")
    model_server.push(tool_calls(("notes_search", {"query": "secret"}), delay=1), answer("done"))
    timer = _during_the_model_call(
        lambda: user.user_permissions.remove(Permission.objects.get(codename="view_note"))
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
    timer = _during_the_model_call(lambda: AgentSettings.objects.filter(pk=1).update(enabled=False))
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
