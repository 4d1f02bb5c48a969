"""Halting a streamed answer while the model is silent: a stop, a sign-out or the deadline ends the
stream within a second, and what was streamed is kept (or not) as the outcome says.

Each turn is run here, in the test's thread, by calling the task itself; no Celery worker runs
in this module, so none can take the queued turn first and leave the test watching nothing.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any, Callable

import pytest
from django.db import connection
from django.utils import timezone

from agent import turns
from agent.access import SessionRef
from agent.models import AIRequest, Lock, Turn
from agent.tasks import run_turn
from agent.turns import locks
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.turns import WORDS, messages_of
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PAUSED_AT = 9  # the chunk after which the model thinks, silent, for PAUSE_S
PAUSE_S = 8.0


class Halt:
    """Once the stream has gone silent after chunk ``paused_at``, ``act()`` in another thread."""

    def __init__(
        self,
        model_server: ScriptedModelServer,
        act: Callable[[], None],
        paused_at: int = PAUSED_AT,
        *,
        silent: Callable[[], bool] | None = None,
    ):
        self.done: list[float] = []
        silent = silent or (lambda: len(model_server.chunk_times) > paused_at)
        self.thread = threading.Thread(target=self._run, args=(silent, act), daemon=True)
        self.thread.start()

    def _run(self, silent: Callable[[], bool], act: Callable[[], None]) -> None:
        try:
            wait_until(silent, 10, "the pause")
            time.sleep(0.1)
            act()
            self.done.append(time.monotonic())
        finally:
            connection.close()

    def done_at(self) -> float:
        """When ``act()`` returned; waits for the thread, so a turn ending first cannot hide it."""
        self.thread.join(15)
        assert self.done, "the halt never ran"
        return self.done[0]


STREAMED_BEFORE_THE_PAUSE = WORDS[: WORDS.index(f" word{PAUSED_AT + 1}")]


@pytest.mark.parametrize(
    "halt, status, shape, journalled",
    [
        ("stop", (Turn.Status.STOPPED, ""), [("assistant", "", True), ("notice", "stopped", False)], "interrupted"),
        # a revocation keeps nothing: the session that saw the words has ended
        ("logout", (Turn.Status.FAILED, "session_ended"), [("notice", "session_ended", False)], "interrupted"),
    ],
)
def test_a_stop_or_a_revocation_while_the_model_sends_nothing_halts_the_stream_within_a_second(
    session: Any,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    halt: str,
    status: Any,
    shape: list[tuple[str, str, bool]],
    journalled: str,
) -> None:
    # given: a model that writes ten words, then thinks in silence for eight seconds
    client, ref = session
    endpoint.timeout_s = 30
    endpoint.save()
    model_server.push(answer(WORDS, chunk_delay=0.05, pauses={PAUSED_AT: PAUSE_S}))
    turn = turns.start(ref, chat.pk, "think hard", impersonated=False)
    # when: the user stops the turn, or signs out, during the pause
    acts = {"stop": lambda: turns.stop(ref, chat.pk, impersonated=False), "logout": client.logout}
    halting = Halt(model_server, acts[halt])
    run_turn(str(turn.pk))
    ended = time.monotonic()
    # then: the stream was halted within a second, not at the next chunk, with today's outcome
    assert ended - halting.done_at() < 1.0 + 0.5  # within a second, and the notice's store
    row = Turn.objects.get(pk=turn.pk)
    assert (row.status, row.end_reason) == status
    assert [(m.role, m.notice_code, m.partial) for m in messages_of(chat)] == [("user", "", False), *shape]
    assert list(AIRequest.objects.values_list("error_code", flat=True)) == [journalled]
    assert len(model_server.chunk_times) == PAUSED_AT + 1
    if halt == "stop":  # every word the model sent before it went silent
        assert messages_of(chat)[1].content == STREAMED_BEFORE_THE_PAUSE


def test_a_stop_while_the_model_has_not_answered_at_all_halts_the_call_within_a_second(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    # given: a model that takes six seconds before it sends its first byte (headers included)
    endpoint.timeout_s = 30
    endpoint.save()
    model_server.push(answer("Too late.", delay=6))
    turn = turns.start(ref, chat.pk, "think hard", impersonated=False)
    # when: the user stops the turn while the request waits for the answer's headers
    stop = Halt(
        model_server, lambda: turns.stop(ref, chat.pk, impersonated=False), silent=lambda: model_server.requests
    )
    run_turn(str(turn.pk))
    ended = time.monotonic()
    # then: the call was cut within a second of the stop, not when the model began; nothing was kept
    assert ended - stop.done_at() < 1.0 + 0.5
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.STOPPED
    assert [(m.role, m.notice_code) for m in messages_of(chat)] == [("user", ""), ("notice", "stopped")]
    assert list(AIRequest.objects.values_list("error_code", flat=True)) == ["interrupted"]


def test_the_deadline_while_the_model_sends_nothing_halts_the_stream_within_a_second(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    # given: a model that writes for over two seconds, then thinks in silence past the turn's deadline
    endpoint.timeout_s = 30
    endpoint.save()
    model_server.push(answer(WORDS, chunk_delay=0.25, pauses={PAUSED_AT: PAUSE_S}))
    turn = turns.start(ref, chat.pk, "think hard", impersonated=False)
    deadline = timezone.now() + timedelta(seconds=3)
    Turn.objects.filter(pk=turn.pk).update(deadline_at=deadline)
    # when: the turn runs into its deadline during the pause
    run_turn(str(turn.pk))
    # then: it ended within a second of the deadline, as a deadline, keeping what was streamed
    assert (timezone.now() - deadline).total_seconds() < 1.0
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.DEADLINE
    assert [(m.role, m.notice_code, m.partial) for m in messages_of(chat)] == [
        ("user", "", False),
        ("assistant", "", True),
        ("notice", "deadline", False),
    ]
    row = AIRequest.objects.get()
    kept = messages_of(chat)[1]
    assert kept.content == STREAMED_BEFORE_THE_PAUSE
    assert (row.error_code, kept.ai_request_id, kept.output_tokens) == ("deadline", row.pk, row.output_tokens)


def stop_during_the_pause(
    ref: SessionRef, chat: Any, model_server: ScriptedModelServer, reply: dict[str, Any], paused_at: int = PAUSED_AT
) -> Turn:
    """Run a turn whose model goes silent after chunk ``paused_at``, stopped during the silence."""
    model_server.push(reply)
    turn = turns.start(ref, chat.pk, "think hard", impersonated=False)
    halting = Halt(model_server, lambda: turns.stop(ref, chat.pk, impersonated=False), paused_at)
    run_turn(str(turn.pk))
    assert time.monotonic() - halting.done_at() < 1.0 + 0.5
    return Turn.objects.get(pk=turn.pk)


def test_a_stop_before_any_text_keeps_nothing_and_never_runs_a_tool_call_half_received(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    # given: a model that sends nothing but the first half of a tool call's arguments, then thinks
    endpoint.timeout_s = 30
    endpoint.save()
    reply = {**tool_calls(("count_me", {"n": 12345})), "pauses": {0: PAUSE_S}}
    turn = stop_during_the_pause(ref, chat, model_server, reply, paused_at=0)
    # then: no empty partial answer, no tool run, the stopped notice as before
    assert turn.status == Turn.Status.STOPPED
    assert [(m.role, m.notice_code) for m in messages_of(chat)] == [("user", ""), ("notice", "stopped")]
    assert counter == []


def test_a_stop_during_a_tool_call_keeps_the_text_before_it_and_never_runs_the_call(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer, counter: list[Any]
) -> None:
    endpoint.timeout_s = 30
    endpoint.save()
    reply = {**tool_calls(("count_me", {"n": 12345}), content="Let me count."), "pauses": {3: PAUSE_S}}
    turn = stop_during_the_pause(ref, chat, model_server, reply, paused_at=3)  # after half the call's arguments
    assert turn.status == Turn.Status.STOPPED
    assert [(m.role, m.content, m.tool_calls, m.partial) for m in messages_of(chat)][1:] == [
        ("assistant", "Let me count.", None, True),
        ("notice", "", None, False),
    ]
    assert counter == []


def test_a_marker_beginning_at_the_end_of_a_stopped_stream_is_not_kept(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    endpoint.timeout_s = 30
    endpoint.save()
    pieces = ["Sorry,", " I only help", " with notes.", " ⟦off", "_purpose:"]
    reply = answer("", chunks=pieces, pauses={len(pieces) - 1: PAUSE_S})
    turn = stop_during_the_pause(ref, chat, model_server, reply, len(pieces) - 1)
    assert turn.status == Turn.Status.STOPPED
    assert [(m.role, m.content, m.partial) for m in messages_of(chat)][1] == (
        "assistant",
        "Sorry, I only help with notes.",
        True,
    )


def test_the_next_turn_s_history_holds_the_partial_answer(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    # given: an answer stopped after its first ten words
    endpoint.timeout_s = 30
    endpoint.save()
    reply = answer(WORDS, chunk_delay=0.02, pauses={PAUSED_AT: PAUSE_S})
    assert stop_during_the_pause(ref, chat, model_server, reply).status == Turn.Status.STOPPED
    # when: the user writes again
    model_server.push(answer("Go on then."))
    run_turn(str(turns.start(ref, chat.pk, "and then?", impersonated=False).pk))
    # then: the model reads the words the user read, as the assistant's, before the new message
    sent = [(m["role"], m["content"]) for m in model_server.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == [("user", "think hard"), ("assistant", STREAMED_BEFORE_THE_PAUSE), ("user", "and then?")]


def test_a_stopped_turn_that_lost_its_lease_keeps_no_partial_answer(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    # given: a turn whose lease a newer turn takes over while the model is silent, and a stop
    endpoint.timeout_s = 30
    endpoint.save()
    model_server.push(answer(WORDS, chunk_delay=0.02, pauses={PAUSED_AT: PAUSE_S}))
    turn = turns.start(ref, chat.pk, "think hard", impersonated=False)
    newer = uuid.uuid4()

    def take_over_then_stop() -> None:
        name = locks.chat_lock(chat.pk)
        Lock.objects.filter(name=name).update(expires_at=timezone.now() - timedelta(seconds=1))
        assert locks.take(name, newer)
        assert turns.stop(ref, chat.pk, impersonated=False)

    halting = Halt(model_server, take_over_then_stop)
    run_turn(str(turn.pk))
    # then: the fenced store refused the partial answer; the turn ended as one that lost its chat
    halting.done_at()
    assert (Turn.objects.get(pk=turn.pk).end_reason, [m.role for m in messages_of(chat)]) == (
        "lock_lost",
        ["user", "notice"],
    )
    assert Lock.objects.get(name=locks.chat_lock(chat.pk)).holder == newer
