"""Redis Sentinel fails the channel layer over to the replica mid-turn: tabs carry on or resync, nothing is lost.

daphne and the worker reach the layer through the test's own sentinel
(``redis+sentinel://``, as ``agent.layers.redis_channel_layer`` reads it); the
tabs behave as the page does (reconnect with backoff, resync with ``after``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest
from websockets.exceptions import WebSocketException

from agent.access import SessionRef
from agent.models import Message, Turn
from tests.support.harness import Stack, Stacks, Tab
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.redis_servers import SentinelSet, Servers
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

READ_S = 8  # the turn is inside a read while the failover runs


@pytest.fixture(scope="module")
def sentinel_set(django_db_setup: Any) -> Iterator[SentinelSet]:
    servers = Servers()
    try:
        yield SentinelSet(servers)
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def stack(sentinel_set: SentinelSet, stacks: Stacks) -> Iterator[Stack]:
    site = stacks.use("sentinel", redis_url=sentinel_set.url)
    yield site
    site.stop_all()


def stored(chat: Any) -> list[Message]:
    return list(Message.objects.filter(conversation=chat).order_by("seq"))


def test_across_a_sentinel_failover_mid_turn_every_tab_shows_the_chat_as_stored(
    sentinel_set: SentinelSet,
    stack: Stack,
    tabs: Callable[..., Tab],
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    figure: Callable[[str, float], None],
) -> None:
    # given two tabs of a chat, and a turn inside a slow read
    stack.start("daphne", "worker")
    open_tabs = [tabs(ref.session_key), tabs(ref.session_key)]
    for tab in open_tabs:
        tab.subscribe(chat.pk)
        tab.follow()
    model_server.push(tool_calls(("notes_wait", {"seconds": READ_S})), answer("after the failover"))
    turn = open_tabs[0].send("hello")
    open_tabs[0].message_frame(lambda view: view["role"] == "assistant" and view["tool_calls"], 30, "the tool call")
    # when the sentinel promotes the replica while the read runs
    old, failed_over = sentinel_set.master_port(), time.monotonic()
    assert sentinel_set.fail_over() != old
    # then the turn ends as it would have, and each tab shows the chat as stored
    wait_until(lambda: Turn.objects.filter(pk=turn).exclude(status__in=Turn.LIVE).exists(), 60, "the turn to end")
    assert Turn.objects.get(pk=turn).status == "finished"
    shown = [tab.wait_showing(stored(chat), 20) for tab in open_tabs]
    figure(
        f"sentinel failover -> every tab shows the chat as stored ({READ_S} s read included)", max(shown) - failed_over
    )
    # and a new turn's events reach both tabs through the new master
    model_server.push(answer("on the new master"))
    again = wait_until(lambda: _send(open_tabs[1], "again"), 60, "a new turn to be accepted")
    wait_until(lambda: Turn.objects.filter(pk=again, status="finished").exists(), 60, "the new turn to finish")
    assert [(m.role, m.content) for m in stored(chat)][-2:] == [("user", "again"), ("assistant", "on the new master")]
    for tab in open_tabs:
        tab.wait_showing(stored(chat), 20)


def _send(tab: Tab, text: str) -> str | None:
    """A turn started from the tab, or None while the tab is still reconnecting."""
    try:
        return tab.send(text)
    except (AssertionError, AttributeError, OSError, WebSocketException):
        return None
