"""The deadline bounds every model call, retries and the task's soft time limit included."""

from __future__ import annotations

import logging
import signal
import time
from typing import Any, Iterator

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from agent import turns
from agent.models import AIRequest, Message, Turn
from agent.tasks import run_turn
from tests.support.model_server import answer, error, tool_calls
from tests.support.turns import agent_conf, messages_of

pytestmark = pytest.mark.django_db(transaction=True)


def shape(chat: Any) -> list[tuple[str, str]]:
    return [(m.role, m.notice_code) for m in messages_of(chat)]


def test_retries_stop_at_the_deadline(ref, chat, endpoint, model_server):
    # given a provider that keeps failing with 503, and room for many retries but a short deadline
    model_server.push(*[error(503, delay=0.4) for _ in range(10)])
    endpoint.timeout_s = 30
    endpoint.save()
    with agent_conf(TURN_DEADLINE_S=4, MODEL_MAX_RETRIES=10):
        turn = turns.start(ref, chat.pk, "hello", impersonated=False)
        began = time.monotonic()
        run_turn(str(turn.pk))
        took = time.monotonic() - began
    # then the call gave up before the deadline, and says the provider failed, not that it ran out
    assert took < 5
    assert 2 <= len(model_server.requests) < 10
    row = AIRequest.objects.get()
    assert (row.status, row.error_code, row.http_status) == ("error", "api_error", 503)


def test_an_attempt_never_waits_past_the_deadline(ref, chat, endpoint, model_server):
    # given an endpoint whose own timeout is far longer than the turn has left
    model_server.push(answer("too late", delay=5))
    endpoint.timeout_s = 60
    endpoint.save()
    with agent_conf(TURN_DEADLINE_S=1):
        turn = turns.start(ref, chat.pk, "hello", impersonated=False)
        began = time.monotonic()
        run_turn(str(turn.pk))
    assert time.monotonic() - began < 2.5
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.DEADLINE
    assert shape(chat) == [("user", ""), ("notice", "deadline")]
    assert AIRequest.objects.get().error_code == "deadline"


def test_a_stream_still_coming_at_the_deadline_is_cut_there_and_what_came_kept_as_partial(
    ref, chat, endpoint, model_server
):
    # given a model that streams for far longer than the turn has left
    model_server.push(answer(" ".join(["word"] * 100), chunk_delay=0.05))
    with agent_conf(TURN_DEADLINE_S=1):
        turn = turns.start(ref, chat.pk, "hello", impersonated=False)
        began = time.monotonic()
        run_turn(str(turn.pk))
    assert time.monotonic() - began < 2
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.DEADLINE
    assert shape(chat) == [("user", ""), ("assistant", ""), ("notice", "deadline")]
    kept = Message.objects.get(conversation=chat, role="assistant")
    assert kept.partial and 0 < kept.content.count("word") < 100
    assert AIRequest.objects.get().error_code == "deadline"


@pytest.fixture
def soft_time_limit_in() -> Iterator[Any]:
    """Raise Celery's ``SoftTimeLimitExceeded`` in this thread after some seconds, as the worker's
    signal handler does."""

    def raise_soft_limit(signum: int, frame: Any) -> None:
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, raise_soft_limit)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_the_soft_time_limit_inside_the_model_call_ends_the_turn_as_deadline(
    ref, chat, endpoint, model_server, soft_time_limit_in, caplog
):
    model_server.push(answer("never read", delay=3))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    soft_time_limit_in(0.5)
    with caplog.at_level(logging.ERROR, logger="agent"):
        run_turn(str(turn.pk))
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("deadline", "")
    assert shape(chat) == [("user", ""), ("notice", "deadline")]
    row = AIRequest.objects.get()
    assert (row.status, row.error_code) == ("error", "deadline")  # not a provider's invalid response
    assert not [r for r in caplog.records if r.exc_info]  # no traceback for an expected end


def test_the_soft_time_limit_between_steps_ends_the_turn_as_deadline(
    ref, chat, endpoint, model_server, soft_time_limit_in, declare
):
    declare(lambda ctx: time.sleep(3) or {}, name="slow")
    model_server.push(tool_calls(("slow", {})))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    soft_time_limit_in(0.8)
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DEADLINE and shape(chat)[-1] == ("notice", "deadline")
