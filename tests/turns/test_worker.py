"""Turns run by a real Celery worker on the Redis broker, and acted on from this thread while the model
call is slow."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agent import turns
from agent.access import SessionRef
from agent.conversations import create_conversation, delete_conversation, topic
from agent.models import AIRequest, Lock, Turn
from agent.turns import locks, monitor
from tests.support.layer import Listener
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.turns import agent_conf, messages_of, wait_ended
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
SLOW = 1.0


def shape(chat: Any) -> list[tuple[str, str]]:
    return [(m.role, m.tool_outcome or m.notice_code) for m in messages_of(chat)]


def start_slow(ref: SessionRef, chat: Any, model_server: ScriptedModelServer, *replies: Any) -> Turn:
    """Start a turn whose first model call is slow; return once the model has it."""
    model_server.push(*replies)
    model_server.received.clear()
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)  # queued as the start commits
    assert model_server.received.wait(10), "the worker did not call the model"
    return turn


def test_a_turn_queued_on_commit_is_run_by_a_worker(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_search", {"query": "milk"})), answer("You have no notes on milk."))
    turn = wait_ended(turns.start(ref, chat.pk, "any milk notes?", impersonated=False))
    assert (turn.status, turn.session_key) == ("finished", "")
    assert shape(chat) == [("user", ""), ("assistant", ""), ("tool", "ok"), ("assistant", "")]
    assert not Lock.objects.exists()  # the chat and the user's slot are free again


def test_stop_during_a_slow_model_call_lets_it_finish_and_keeps_nothing(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    endpoint.supports_streaming = False  # a streamed call is cut instead (tests/turns/test_stream.py)
    endpoint.save()
    turn = start_slow(ref, chat, model_server, answer("a partial answer", delay=SLOW))
    assert turns.stop(ref, chat.pk, impersonated=False) is True
    turn = wait_ended(turn)
    assert turn.status == Turn.Status.STOPPED
    assert shape(chat) == [("user", ""), ("notice", "stopped")]
    row = AIRequest.objects.get()
    assert row.status == "success" and row.attribution["turn"] == str(turn.pk)


def test_logout_during_a_slow_model_call_ends_the_turn_at_the_next_round(
    worker: Any, session: Any, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    client, ref = session
    turn = start_slow(ref, chat, model_server, tool_calls(("notes_search", {}), delay=SLOW), answer("never"))
    client.logout()
    turn = wait_ended(turn)
    assert (turn.status, turn.end_reason, turn.session_key) == ("failed", "session_ended", "")
    assert shape(chat)[-1] == ("notice", "session_ended")
    assert len(model_server.requests) == 1


def test_a_chat_deleted_during_a_slow_model_call_gets_nothing_more(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    turn = start_slow(ref, chat, model_server, tool_calls(("notes_search", {}), delay=SLOW), answer("never"))
    delete_conversation(ref, chat.pk, impersonated=False)
    turn = wait_ended(turn)
    assert (turn.status, turn.end_reason) == ("failed", "chat_gone")
    assert shape(chat) == [("user", "")]  # no answer, no tool result, no notice
    assert len(model_server.requests) == 1
    assert AIRequest.objects.count() == 1


def test_a_lock_taken_over_during_a_slow_model_call_stores_nothing_more(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    turn = start_slow(ref, chat, model_server, tool_calls(("notes_search", {}), delay=SLOW), answer("never"))
    name, newer = locks.chat_lock(chat.pk), uuid.uuid4()
    Lock.objects.filter(name=name).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert locks.take(name, newer)
    turn = wait_ended(turn)
    assert (turn.status, turn.end_reason) == ("failed", "lock_lost")
    assert shape(chat) == [("user", ""), ("notice", "lock_lost")]
    assert len(model_server.requests) == 1
    assert Lock.objects.get(name=name).holder == newer


def test_after_a_turn_ends_the_chat_takes_a_new_one(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("one"), answer("two"))
    wait_ended(turns.start(ref, chat.pk, "first", impersonated=False))
    second = wait_ended(turns.start(ref, chat.pk, "second", impersonated=False))
    assert second.status == "finished"
    assert [m.content for m in messages_of(chat)] == ["first", "one", "second", "two"]


def test_turns_of_two_chats_run_at_once(
    worker: Any, ref: SessionRef, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    chats = [create_conversation(ref, {}, impersonated=False) for _ in range(2)]
    model_server.push(answer("a", delay=0.5), answer("b", delay=0.5))
    started = [turns.start(ref, c.pk, "hi", impersonated=False) for c in chats]
    wait_until(lambda: len(model_server.requests) == 2, 5, "both chats' model calls at once")
    assert [wait_ended(t).status for t in started] == ["finished", "finished"]


def test_the_heartbeat_renews_the_lease_during_a_long_model_call(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("slow but kept", delay=1.5))
    with agent_conf(LOCK_LEASE_S=1, LOCK_RENEW_S=0.2):
        turn = wait_ended(turns.start(ref, chat.pk, "hello", impersonated=False))
    assert (turn.status, turn.end_reason) == ("finished", "")
    assert shape(chat) == [("user", ""), ("assistant", "")]


def test_a_turn_stuck_past_its_deadline_and_grace_loses_its_lease_and_the_sweep_frees_the_chat(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, caplog: Any
) -> None:
    """A worker of threads cannot kill a step that never returns, as prefork's hard time limit did: the
    heartbeat stops renewing after the deadline and the grace, and the stuck step writes nothing after."""
    caplog.set_level(logging.INFO, logger="agent")
    with agent_conf(TURN_DEADLINE_S=4, STOP_GRACE_S=1, LOCK_LEASE_S=1, LOCK_RENEW_S=0.2):
        turn = start_slow(ref, chat, model_server, tool_calls(("notes_wait", {"seconds": 12})), answer("never asked"))
        wait_until(lambda: monitor.sweep() == 1, 9, "the sweep to end the stuck turn while its tool still runs")
        ended = Turn.objects.get(pk=turn.pk)
        assert (ended.status, ended.end_reason) == ("interrupted", "worker_lost")
        assert not Lock.objects.filter(holder=turn.pk).exists()  # the chat is free
        wait_until(lambda: "had already ended" in caplog.text, 15, "the stuck step to return and its task to end")
    assert shape(chat) == [("user", ""), ("assistant", ""), ("notice", "interrupted")]  # its result fenced off
    assert len(model_server.requests) == 1


def test_a_turn_tells_its_chat_by_events_that_carry_ids_only_but_the_drafts_of_its_answer(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    listener = Listener()
    listener.join(topic(chat.pk))
    model_server.push(answer("SECRET-ANSWER-TEXT"))
    turn = wait_ended(turns.start(ref, chat.pk, "SECRET-QUESTION-TEXT", impersonated=False))
    heard: list[dict[str, Any]] = []
    while (event := listener.receive(timeout=1)) is not None:
        heard.append(event)
    changes = [e["status"] for e in heard if e["type"] == "agent.turn_changed"]
    assert changes == ["queued", "running", "ended"]
    added = [e["message"] for e in heard if e["type"] == "agent.message_added"]
    assert added == [str(m.pk) for m in messages_of(chat)]
    assert all(e["conversation"] == str(chat.pk) for e in heard)
    drafts = [e for e in heard if e["type"] == "agent.answer_delta"]
    assert drafts and all(e["text"] in "SECRET-ANSWER-TEXT" and e["turn"] == str(turn.pk) for e in drafts)
    others = [e for e in heard if e["type"] != "agent.answer_delta"]
    assert "SECRET" not in repr(others) and ref.session_key not in repr(heard)
    assert "QUESTION" not in repr(heard)
    assert turn.status == "finished"
