"""A worker killed mid-turn, as the fault tests at quick and at production settings both run it."""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable

from agent.models import AIRequest, Lock, Message, Turn
from tests.support.harness import Stack, Tab
from tests.support.model_server import ScriptedModelServer, answer, tool_calls

TOLD_WITHIN_S = 45


def crash_mid_turn(
    stack: Stack,
    tabs: Callable[..., Tab],
    session_key: str,
    chat: Any,
    model_server: ScriptedModelServer,
    figure: Callable[[str, float], None],
    *,
    kill: str,
    during: str,
) -> None:
    """Kill the turn's worker (``kill``: "child" or "group") ``during`` the "model" call or a "tool"; check the end."""
    # given: two open tabs of the chat, and a turn inside a slow model call or a slow read
    stack.start("daphne", "worker", "beat")
    open_tabs = [tabs(session_key), tabs(session_key)]
    for tab in open_tabs:
        tab.subscribe(chat.pk)
    if during == "model":
        model_server.push(answer("never delivered", delay=60))
    else:
        model_server.push(tool_calls(("notes_wait", {"seconds": 30})))
    turn = open_tabs[0].send("hello")
    if during == "model":
        assert model_server.received.wait(30), "the model was never called"
    else:
        open_tabs[0].message_frame(
            lambda view: view["role"] == "assistant" and view["tool_calls"], 30, "the answer that calls notes_wait"
        )
    child = stack.pool_child(turn)
    # when: the worker is killed
    crashed = time.monotonic()
    if kill == "child":
        os.kill(child, signal.SIGKILL)
        if child == stack["worker"].pid:  # a worker of threads runs its turns itself: its supervisor starts it again
            stack.kill("worker")
            stack.start("worker")
    else:
        stack.kill("worker")
        stack.start("worker")  # as its supervisor would
    # then: every tab is told the turn ended, with the notice, within 45 s
    told = [
        max(
            tab.turn_frame(turn, "ended", 90),
            tab.message_frame(lambda view: view["notice_code"] == "interrupted", 90, "the interrupted notice"),
        )
        for tab in open_tabs
    ]
    figure(f"worker SIGKILL ({kill}, mid {during}) -> every tab told", max(told) - crashed)
    assert max(told) - crashed <= TOLD_WITHIN_S
    # and: the chat is free, and nothing was stored twice
    row = Turn.objects.get(pk=turn)
    assert (row.status, row.end_reason, row.session_key) == ("interrupted", "worker_lost", "")
    assert not Lock.objects.filter(holder=row.pk).exists()
    stored = [(m.role, m.notice_code) for m in Message.objects.filter(conversation=chat).order_by("seq")]
    before_crash = [("user", "")] + ([("assistant", "")] if during == "tool" else [])
    assert stored == [*before_crash, ("notice", "interrupted")]
    assert AIRequest.objects.count() == (1 if during == "tool" else 0)
    # and: a new turn runs in the chat, and each tab shows the chat as stored, once
    model_server.push(answer("back again"))
    again = open_tabs[1].send("again")
    for tab in open_tabs:
        tab.turn_frame(again, "ended", 60)
    assert Turn.objects.get(pk=again).status == "finished"
    assert len(model_server.requests) == 2
    stored = list(Message.objects.filter(conversation=chat).order_by("seq"))
    assert [m.content for m in stored][-2:] == ["again", "back again"]
    for tab in open_tabs:
        tab.wait_showing(stored, 10)
