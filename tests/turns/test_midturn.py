"""The world changes while a turn runs: a read tool declared here makes the change when the model calls it
. The same, from another thread during a slow model call, is in test_worker."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Callable

import pytest
from django.contrib.auth.models import Permission
from django.contrib.sessions.models import Session
from django.utils import timezone

from agent import turns
from agent.access import SessionRef
from agent.conversations import delete_conversation
from agent.models import AgentSettings, AIRequest, Lock, Turn, UserSettings
from agent.tasks import run_turn
from agent.turns import locks, monitor
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.turns import agent_conf, messages_of

pytestmark = pytest.mark.django_db


def shape(chat: Any) -> list[tuple[str, str]]:
    return [(m.role, m.tool_outcome or m.notice_code) for m in messages_of(chat)]


def run_with_tool(
    ref: SessionRef,
    chat: Any,
    model_server: ScriptedModelServer,
    declare: Any,
    act: Callable[[Any], Any],
    *,
    calls: int = 1,
) -> tuple[Turn, list[int]]:
    """A turn whose model calls ``act`` (then ``after`` ``calls - 1`` times), then would answer."""
    after: list[int] = []
    declare(lambda ctx: act(ctx) or "acted", name="act")
    declare(lambda ctx: after.append(1) or "after", name="after")
    model_server.push(tool_calls(("act", {}), *[("after", {})] * (calls - 1)), answer("never stored"))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    return turn, after


def revoke_use(ctx: Any) -> None:
    ctx.user.user_permissions.remove(Permission.objects.get(codename="use_agent"))


def switch_user_off(ctx: Any) -> None:
    UserSettings.objects.update_or_create(user=ctx.user, defaults={"enabled": False})


def switch_assistant_off(ctx: Any) -> None:
    AgentSettings.objects.filter(pk=1).update(enabled=False)


def deactivate(ctx: Any) -> None:
    type(ctx.user).objects.filter(pk=ctx.user.pk).update(is_active=False)


def change_password(ctx: Any) -> None:
    user = type(ctx.user).objects.get(pk=ctx.user.pk)
    user.set_password("a-new-password")
    user.save()


def log_out(ctx: Any) -> None:
    Session.objects.filter(session_key=ctx.scope.actor.session_key).delete()


@pytest.mark.parametrize(
    "act, reason",
    [
        (revoke_use, "forbidden"),
        (switch_user_off, "forbidden"),
        (switch_assistant_off, "forbidden"),
        (deactivate, "session_ended"),
        (change_password, "session_ended"),
        (log_out, "session_ended"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_a_lost_right_between_rounds_ends_the_turn_with_its_notice(
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    declare: Any,
    act: Callable[[Any], None],
    reason: str,
) -> None:
    turn, _after = run_with_tool(ref, chat, model_server, declare, act)
    assert (turn.status, turn.end_reason) == ("failed", reason)
    assert shape(chat) == [("user", ""), ("assistant", ""), ("tool", "ok"), ("notice", reason)]
    assert len(model_server.requests) == 1  # no model step after the revocation
    assert turn.session_key == "" and not Lock.objects.filter(holder=turn.pk).exists()


def test_a_chat_deleted_mid_turn_ends_it_quietly(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    turn, after = run_with_tool(
        ref, chat, model_server, declare, lambda ctx: delete_conversation(ref, chat.pk, impersonated=False), calls=2
    )
    assert (turn.status, turn.end_reason) == ("failed", "chat_gone")
    assert shape(chat) == [("user", ""), ("assistant", "")]  # nothing written after the delete, no notice
    assert after == [] and len(model_server.requests) == 1


def test_a_lock_taken_over_before_a_tool_call_ends_the_turn_there(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    newer = uuid.uuid4()

    def take_over(ctx: Any) -> None:
        name = locks.chat_lock(chat.pk)
        Lock.objects.filter(name=name).update(expires_at=timezone.now() - timedelta(seconds=1))
        assert locks.take(name, newer)

    turn, after = run_with_tool(ref, chat, model_server, declare, take_over, calls=2)
    assert (turn.status, turn.end_reason) == ("failed", "lock_lost")
    assert shape(chat) == [("user", ""), ("assistant", ""), ("notice", "lock_lost")]  # the result is not stored
    assert after == [] and len(model_server.requests) == 1
    assert Lock.objects.get(name=locks.chat_lock(chat.pk)).holder == newer  # not released by the old turn


def test_a_stop_asked_between_tool_calls_ends_the_turn_before_the_next(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, declare: Any
) -> None:
    turn, after = run_with_tool(
        ref, chat, model_server, declare, lambda ctx: monitor.request_stop(ctx.turn_ref), calls=2
    )
    assert (turn.status, turn.end_reason) == ("stopped", "")
    assert shape(chat) == [("user", ""), ("assistant", ""), ("tool", "ok"), ("notice", "stopped")]
    assert after == [] and len(model_server.requests) == 1


def test_a_stop_asked_before_the_task_runs_stores_nothing(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    assert turns.stop(ref, chat.pk, impersonated=False)
    run_turn(str(turn.pk))
    assert shape(chat) == [("notice", "stopped")]
    assert Turn.objects.get(pk=turn.pk).status == "stopped" and model_server.requests == []


def test_the_deadline_cuts_a_slow_model_call_and_keeps_nothing(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("a late answer", delay=1.2))
    with agent_conf(TURN_DEADLINE_S=1):
        turn = turns.start(ref, chat.pk, "hello", impersonated=False)
        run_turn(str(turn.pk))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DEADLINE
    assert shape(chat) == [("user", ""), ("notice", "deadline")]
    row = AIRequest.objects.get()  # the call is journalled as cut by the deadline, not as a provider's fault
    assert (row.status, row.error_code, row.attribution["turn"]) == ("error", "deadline", str(turn.pk))
    assert row.latency_ms < 1500


def test_a_second_delivery_of_the_task_finds_the_turn_claimed(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("once"))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    run_turn(str(turn.pk))
    run_turn(str(turn.pk))
    assert shape(chat) == [("user", ""), ("assistant", "")]
    assert len(model_server.requests) == 1


def test_a_malformed_ref_runs_nothing(db: Any) -> None:
    run_turn("not-a-uuid")
    run_turn(str(uuid.uuid4()))
    assert not Turn.objects.exists()


def test_a_message_the_database_refuses_ends_the_turn_as_store_failed(
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    declare: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    declare(lambda ctx: {"text": "SECRET-PART\u0000rest"}, name="nul")  # PostgreSQL's jsonb takes no NUL
    model_server.push(tool_calls(("nul", {})), answer("never"))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("interrupted", "store_failed")
    assert shape(chat) == [("user", ""), ("assistant", ""), ("notice", "interrupted")]
    assert len(model_server.requests) == 1
    assert "SECRET-PART" not in caplog.text
