"""Beat down for a while and a broker that lost a queued turn: the sweep queues it again once beat is back.

The issue's scenario is beat dead for a minute; here the sweep's threshold
(``QUEUED_REQUEUE_S``) is 5 s and beat stays down 10 s, the same story in a
sixth of the time: the turn is older than the threshold when beat returns.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from agent.access import SessionRef
from agent.models import Message, Turn
from tests.support.harness import QUICK_SETTINGS, Stack, Tab
from tests.support.model_server import ScriptedModelServer, answer

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]

AGENT_SETTINGS = QUICK_SETTINGS
BEAT_DOWN_S = 10
WITHIN_S = 45


def test_a_turn_the_broker_lost_while_beat_was_down_runs_once_beat_is_back(
    stack: Stack,
    tabs: Callable[..., Tab],
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    figure: Callable[[str, float], None],
) -> None:
    # given: beat is dead, and the broker loses a turn before any worker took it
    stack.start("daphne", "worker", "beat")
    tab = tabs(ref.session_key)
    tab.subscribe(chat.pk)
    stack.kill("beat")
    beat_died = time.monotonic()
    stack.kill("worker")  # nobody takes the turn before the broker loses it
    model_server.push(answer("answered after all"))
    turn = tab.send("hello")
    assert stack.purge_queue() >= 1
    stack.start("worker")
    time.sleep(max(0.0, beat_died + BEAT_DOWN_S - time.monotonic()))
    assert Turn.objects.get(pk=turn).status == "queued"
    # when: beat comes back
    stack.start("beat")
    back = time.monotonic()
    # then: the sweep queues the turn again within 45 s, and it runs once
    running = tab.turn_frame(turn, "running", WITHIN_S + 30)
    figure("beat back -> lost turn queued again and running", running - back)
    assert running - back <= WITHIN_S
    tab.turn_frame(turn, "ended", 30)
    assert Turn.objects.get(pk=turn).status == "finished"
    assert [(m.role, m.content) for m in Message.objects.filter(conversation=chat).order_by("seq")] == [
        ("user", "hello"),
        ("assistant", "answered after all"),
    ]
    assert len(model_server.requests) == 1
