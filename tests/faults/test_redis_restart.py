"""Redis killed and started again mid-turn: tabs reconnect and resync, workers carry on.

The test's own ``redis-server`` (its own port, no persistence, so it comes
back empty) is the channel layer and the broker of this module's daphne and
worker. The tabs behave as the page does: when the server drops a socket they
reconnect with jittered backoff and subscribe with ``after=<last message id>``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest

from agent.access import SessionRef
from agent.models import Message, Turn
from tests.support.harness import RedisServer, Stack, Stacks, Tab, run_artifacts
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]

OUTAGE_S = 2
READ_S = 10  # long enough for the tabs' backoff to bring them back while it runs


@pytest.fixture(scope="module")
def redis_server(django_db_setup: Any) -> Iterator[RedisServer]:
    with RedisServer(run_artifacts() / "private-redis") as server:
        yield server


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, stacks: Stacks) -> Iterator[Stack]:
    """daphne and the worker on the private Redis: channel layer on db 0, broker on db 1."""
    site = stacks.use("private-redis", redis_url=redis_server.url(0), broker_url=redis_server.url(1))
    yield site
    site.stop_all()


def stored(chat: Any) -> list[Message]:
    return list(Message.objects.filter(conversation=chat).order_by("seq"))


def test_after_redis_restarts_mid_turn_tabs_resync_and_workers_carry_on(
    redis_server: RedisServer,
    stack: Stack,
    tabs: Callable[..., Tab],
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    figure: Callable[[str, float], None],
) -> None:
    # given: two tabs of a chat, and a turn inside a slow read
    stack.start("daphne", "worker")
    open_tabs = [tabs(ref.session_key), tabs(ref.session_key)]
    for tab in open_tabs:
        tab.subscribe(chat.pk)
        tab.follow()
    model_server.push(tool_calls(("notes_wait", {"seconds": READ_S})), answer("after the outage"))
    turn = open_tabs[0].send("hello")
    open_tabs[0].message_frame(
        lambda view: view["role"] == "assistant" and view["tool_calls"], 30, "the answer that calls notes_wait"
    )
    # when: Redis dies, and comes back empty, while the read runs
    redis_server.kill()
    killed = time.monotonic()
    time.sleep(OUTAGE_S)
    redis_server.start()
    # then: the tabs reconnect and resync (before the read is over, so what follows must come live)
    for number, tab in enumerate(open_tabs):
        figure(f"redis killed -> tab {number} reconnected and resynced", tab.wait_reconnected(READ_S) - killed)
    # and: the turn ends as it would have, and each tab shows the chat as stored, each message once
    wait_until(lambda: Turn.objects.filter(pk=turn).exclude(status__in=Turn.LIVE).exists(), 30, "the turn to end")
    assert Turn.objects.get(pk=turn).status == "finished"
    for tab in open_tabs:
        tab.wait_showing(stored(chat), 10)
    # and: the workers take new turns with no manual step
    model_server.push(answer("carried on"))
    again = wait_until(lambda: _send(open_tabs[1], "again"), 60, "a new turn to be accepted")
    wait_until(lambda: Turn.objects.filter(pk=again, status="finished").exists(), 60, "the new turn to finish")
    assert [(m.role, m.content) for m in stored(chat)] == [
        ("user", "hello"),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "after the outage"),
        ("user", "again"),
        ("assistant", "carried on"),
    ]
    for tab in open_tabs:
        tab.wait_showing(stored(chat), 20)


def _send(tab: Tab, text: str) -> str | None:
    """A turn started from the tab, or None while the tab is still reconnecting."""
    try:
        return tab.send(text)
    except (AssertionError, AttributeError):
        return None
