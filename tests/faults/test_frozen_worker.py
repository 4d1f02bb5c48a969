"""A worker frozen past its lease writes nothing when it wakes.

The process that runs the turn (a prefork child, or a worker of threads whole,
with another worker beside it) is stopped (SIGSTOP) inside the model call, longer than
the lease; a new turn takes the chat; then the child is continued and gets an
answer that carries the off-purpose marker and proposes a write. Every write
of the old turn is fenced by its lease: no message, no off-purpose flag, no
usage link, no card. Its journal row is still written: the call was made and
cost money.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Callable

import pytest
from django.utils import timezone

from agent.access import SessionRef
from agent.models import AIRequest, Confirmation, Lock, Message, OffPurposeFlag, Turn
from tests.support.harness import QUICK_SETTINGS, Stack, Tab
from tests.support.model_server import ScriptedModelServer, answer, off_purpose, tool_calls
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

AGENT_SETTINGS = QUICK_SETTINGS


def test_a_worker_frozen_past_its_lease_writes_nothing_when_it_wakes(
    stack: Stack,
    tabs: Callable[..., Tab],
    ref: SessionRef,
    chat: Any,
    slow_endpoint: Any,
    model_server: ScriptedModelServer,
) -> None:
    # given: a turn whose pool child is frozen inside its model call, past its lease
    stack.start("daphne", "worker")
    tab = tabs(ref.session_key)
    tab.subscribe(chat.pk)
    model_server.push(
        tool_calls(("notes_create", {"title": "from a zombie"}), content="Sure. " + off_purpose("x"), delay=8),
        answer("the new turn's answer", delay=3),
    )
    old = tab.send("first")
    assert model_server.received.wait(30), "the model was never called"
    child = stack.pool_child(old)
    os.kill(child, signal.SIGSTOP)
    try:
        if child == stack["worker"].pid:  # a worker of threads, frozen whole: another takes the new turn
            stack.start("spare-worker")
        assert not AIRequest.objects.exists(), "the child was stopped too late: its model call had returned"
        wait_until(
            lambda: not Lock.objects.filter(holder=old, expires_at__gt=timezone.now()).exists(),
            30,
            "the frozen turn's lease to run out",
        )
        # when: a new turn takes the chat, and the old child wakes while it runs
        new = tab.send("second")
        wait_until(lambda: len(model_server.requests) == 2, 30, "the new turn's model call")
        messages_before = set(Message.objects.values_list("pk", flat=True))
    finally:
        os.kill(child, signal.SIGCONT)
    wait_until(lambda: not stack.runs(old), 30, "the woken turn's task to end")
    tab.turn_frame(new, "ended", 30)
    # then: the old turn wrote nothing after it woke, and the new turn is whole
    journal = AIRequest.objects.get(attribution__turn=old)  # the call it made is journalled, its cost counted
    written = Message.objects.exclude(pk__in=messages_before).exclude(turn_id=new)
    assert list(written.values_list("role", "content")) == []
    assert not OffPurposeFlag.objects.filter(turn_ref=old).exists()
    assert not Message.objects.filter(ai_request=journal).exists()
    assert not Confirmation.objects.exists()
    assert [(m.role, m.notice_code, m.content) for m in Message.objects.filter(conversation=chat).order_by("seq")] == [
        ("user", "", "first"),
        ("notice", "interrupted", ""),
        ("user", "", "second"),
        ("assistant", "", "the new turn's answer"),
    ]
    assert Turn.objects.get(pk=new).status == "finished"
