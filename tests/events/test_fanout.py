"""Fan-out to many tabs: one check per session and one read per user, fresh, and no silent loss."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Callable

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings as django_settings
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.utils import timezone

from agent import conversations
from agent.access import SessionRef
from agent.core import events
from agent.models import Conversation, Message, Turn
from agent.turns import monitor
from agent.web import shared_reads
from agent.web.shared_reads import SCOPE_FRESH_S
from tests.support.factories import TurnFactory
from tests.support.sessions import login
from tests.support.sockets import close_code, error_frame, opened, parsed, subscribed

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

REDIS_URL = django_settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"]


@pytest.fixture(autouse=True)
def _no_periodic_checks(settings: Any) -> None:
    """Only the events under test check the session here."""
    settings.AGENT = {**settings.AGENT, "SOCKET_RECHECK_S": 3600}


class Calls:
    """Counts the calls of a function of the app, which still runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        self.count = 0
        real = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


def append(chat: Conversation, content: str) -> Message:
    return conversations.append_message(chat.pk, role=Message.Role.ASSISTANT, content=content)


async def test_ten_tabs_of_one_session_cost_one_check_and_one_read_per_message(
    session: tuple[Client, SessionRef],
    chat: Conversation,
    monkeypatch: pytest.MonkeyPatch,
    stale_checks: Callable[[], None],
) -> None:
    tabs = [await opened(session[0]) for _ in range(10)]
    for tab in tabs:
        await subscribed(tab, chat)
    stale_checks()
    checks = Calls(monkeypatch, shared_reads, "authorize_session")
    reads = Calls(monkeypatch, conversations, "message_view")
    message = await sync_to_async(append)(chat, "to every tab")
    frames = [await tab.receive_json_from(timeout=5) for tab in tabs]
    assert {frame["message"]["id"] for frame in frames} == {str(message.pk)}
    assert (checks.count, reads.count) == (1, 1)
    for tab in tabs:
        await tab.disconnect()


async def test_two_sessions_of_one_user_each_check_their_own_session_and_share_the_read(
    user: Any, chat: Conversation, monkeypatch: pytest.MonkeyPatch, stale_checks: Callable[[], None]
) -> None:
    clients = [(await sync_to_async(login)(user))[0] for _ in range(2)]
    tabs = [await opened(client) for client in clients for _ in range(2)]
    for tab in tabs:
        await subscribed(tab, chat)
    stale_checks()
    checks = Calls(monkeypatch, shared_reads, "authorize_session")
    reads = Calls(monkeypatch, conversations, "message_view")
    await sync_to_async(append)(chat, "to both sessions")
    for tab in tabs:
        assert (await tab.receive_json_from(timeout=5))["type"] == "message"
    assert (checks.count, reads.count) == (2, 1)
    for tab in tabs:
        await tab.disconnect()


async def test_a_check_younger_than_a_second_serves_the_next_message_too(
    session: tuple[Client, SessionRef],
    chat: Conversation,
    monkeypatch: pytest.MonkeyPatch,
    stale_checks: Callable[[], None],
) -> None:
    tab = await opened(session[0])
    await subscribed(tab, chat)
    stale_checks()
    checks = Calls(monkeypatch, shared_reads, "authorize_session")
    for content in ("one", "two"):
        await sync_to_async(append)(chat, content)
        assert (await tab.receive_json_from(timeout=5))["message"]["content"] == content
    assert checks.count == 1
    await tab.disconnect()


async def test_a_tab_whose_session_ends_mid_stream_gets_nothing_stored_after_its_last_fresh_check(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    tab = await opened(client)
    await subscribed(tab, chat)

    def stream(count: int, gone_after: int) -> Any:
        """Store ``count`` messages 50 ms apart; the session row goes, with no signal, after ``gone_after``."""
        gone_at = None
        for number in range(count):
            if number == gone_after:
                Session.objects.filter(session_key=ref.session_key).delete()
                gone_at = timezone.now()
            append(chat, f"part {number}")
            time.sleep(0.05)
        connection.close()
        return gone_at

    gone_at = await asyncio.to_thread(stream, 60, 20)
    code, frames = await close_code(tab, within=5)
    assert code == 4401
    delivered = [f["message"]["id"] for f in map(json.loads, frames) if f["type"] == "message"]
    stored_at = await sync_to_async(
        lambda: list(Message.objects.filter(pk__in=delivered).values_list("created_at", flat=True))
    )()
    assert stored_at and max(stored_at) < gone_at + timezone.timedelta(seconds=SCOPE_FRESH_S)
    await tab.disconnect()


async def test_a_missing_message_event_makes_the_tab_resync_instead_of_showing_a_hole(
    session: tuple[Client, SessionRef], chat: Conversation, caplog: pytest.LogCaptureFixture
) -> None:
    tab = await opened(session[0])
    await subscribed(tab, chat)
    # given: the layer loses the event of the chat's first message (the tab's channel is out of the group meanwhile)
    layer = get_channel_layer()
    group = f"asgi:group:{events.topic(chat.pk)}".encode()
    store = redis.Redis.from_url(REDIS_URL)
    (channel,) = store.zrange(group, 0, -1)
    probe = f"agenttest.{time.monotonic_ns()}"
    await layer.group_add(events.topic(chat.pk), probe)
    store.zrem(group, channel)
    first = await sync_to_async(append)(chat, "lost on the way")
    assert (await asyncio.wait_for(layer.receive(probe), 5))["message"] == str(first.pk)  # it was sent, to no tab
    store.zadd(group, {channel: time.time()})
    store.close()
    await layer.group_discard(events.topic(chat.pk), probe)
    lost_before = events.losses["missed message"]
    # when: the next message arrives
    with caplog.at_level(logging.WARNING, logger="agent.core.events"):
        await sync_to_async(append)(chat, "the next one")
        frame = await tab.receive_json_from(timeout=5)
    # then: the tab is told to read what it missed, not shown the second message alone, and the server counts it
    assert frame == {"type": "ready", "resync": str(chat.pk)}
    assert events.losses["missed message"] == lost_before + 1 and "missed events" in caplog.text
    assert await tab.receive_nothing(timeout=0.3)
    # and the page's answer to ready (subscribe from the last message it has) brings both, in order
    reply = await subscribed(tab, chat)
    assert [m["content"] for m in reply["messages"]] == ["lost on the way", "the next one"]
    assert str(first.pk) == reply["messages"][0]["id"]
    await sync_to_async(append)(chat, "and on it goes")
    assert (await tab.receive_json_from(timeout=5))["message"]["content"] == "and on it goes"
    await tab.disconnect()


async def test_a_lost_event_of_a_turns_last_message_makes_the_tab_resync_when_the_turn_ends(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    tab = await opened(session[0])
    await subscribed(tab, chat)
    turn = await sync_to_async(TurnFactory)(conversation=chat, status=Turn.Status.RUNNING)
    # given: the turn's answer is stored while the layer loses its event (the tab is out of the group meanwhile)
    group = f"asgi:group:{events.topic(chat.pk)}".encode()
    store = redis.Redis.from_url(REDIS_URL)
    (channel,) = store.zrange(group, 0, -1)
    store.zrem(group, channel)
    answer = await sync_to_async(conversations.append_message)(
        chat.pk, role=Message.Role.ASSISTANT, content="lost on the way", turn=turn
    )
    await sync_to_async(events.flush)()
    store.zadd(group, {channel: time.time()})
    store.close()
    # when: the turn ends, and no later message would show the hole
    await sync_to_async(monitor.end_turn)(turn, Turn.Status.FINISHED)
    # then: the tab is told to read what it missed before it hears the turn ended, and reading brings the answer
    assert await tab.receive_json_from(timeout=5) == {"type": "ready", "resync": str(chat.pk)}
    ended = await tab.receive_json_from(timeout=5)
    assert ended == {"type": "turn", "conversation": str(chat.pk), "turn": str(turn.pk), "status": "ended"}
    reply = await subscribed(tab, chat)
    assert [m["id"] for m in reply["messages"]] == [str(answer.pk)]
    await tab.disconnect()


async def test_a_tab_that_has_a_turns_last_message_hears_it_ended_without_a_resync(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    tab = await opened(session[0])
    await subscribed(tab, chat)
    turn = await sync_to_async(TurnFactory)(conversation=chat, status=Turn.Status.RUNNING)
    await sync_to_async(conversations.append_message)(
        chat.pk, role=Message.Role.ASSISTANT, content="arrived", turn=turn
    )
    assert (await tab.receive_json_from(timeout=5))["message"]["content"] == "arrived"
    await sync_to_async(monitor.end_turn)(turn, Turn.Status.FINISHED)
    assert (await tab.receive_json_from(timeout=5))["status"] == "ended"
    assert await tab.receive_nothing(timeout=0.3)
    await tab.disconnect()


async def test_a_tab_that_falls_behind_is_told_to_resync(
    session: tuple[Client, SessionRef], chat: Conversation, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "SOCKET_BACKLOG": 2}
    tab = await opened(session[0])
    await subscribed(tab, chat)
    # given: the sockets' one database thread is busy, so this tab's events pile up
    database_busy = asyncio.ensure_future(sync_to_async(time.sleep)(2))
    lost_before = events.losses["tab fell behind"]

    def store(count: int) -> None:
        for number in range(count):
            append(chat, f"burst {number}")
        connection.close()

    await asyncio.to_thread(store, 6)
    await database_busy
    # then: what the tab could take arrives, then the word to resync; nothing after a hole
    frames = []
    while (frame := await tab.receive_json_from(timeout=5))["type"] == "message":
        frames.append(frame["message"]["content"])
    assert frame == {"type": "ready", "resync": str(chat.pk)}
    assert frames == [f"burst {n}" for n in range(len(frames))] and len(frames) < 6
    assert events.losses["tab fell behind"] == lost_before + 1
    assert await tab.receive_nothing(timeout=0.3)
    await tab.disconnect()


async def test_a_logout_closes_the_socket_at_once_while_its_events_wait_for_the_database(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client = session[0]
    tab = await opened(client)
    await subscribed(tab, chat)
    # given: the sockets' database thread is busy, and messages wait for it in the tab's queue
    database_busy = asyncio.ensure_future(sync_to_async(time.sleep)(3))

    def store_then_log_out() -> None:
        for number in range(3):
            append(chat, f"waiting {number}")
        client.logout()
        connection.close()

    await asyncio.to_thread(store_then_log_out)
    # then: the socket closes before the database is free, and none of the waiting messages reach the tab
    code, frames = await close_code(tab, within=1.0)
    assert code == 4401 and parsed(frames) == [error_frame("session_gone")]
    assert not database_busy.done()
    await database_busy
    await tab.disconnect()


async def test_reads_that_wait_for_the_database_thread_go_to_it_in_one_call(
    make_user: Any, monkeypatch: pytest.MonkeyPatch, stale_checks: Callable[[], None]
) -> None:
    tabs, chats = [], []
    for _ in range(3):
        client, ref = await sync_to_async(login)(await sync_to_async(make_user)())
        chat = await sync_to_async(conversations.create_conversation)(ref, {}, impersonated=False)
        tab = await opened(client)
        await subscribed(tab, chat)
        tabs.append(tab)
        chats.append(chat)
    stale_checks()
    batches: list[int] = []
    each = shared_reads._each
    monkeypatch.setattr(shared_reads, "_each", lambda works: batches.append(len(works)) or each(works))
    # given: the database thread is busy while a message comes to each of three users' chats
    database_busy = asyncio.ensure_future(sync_to_async(time.sleep)(1))

    def store() -> None:
        for chat in chats:
            append(chat, "one each")
        connection.close()

    await asyncio.to_thread(store)
    await database_busy
    for tab in tabs:
        assert (await tab.receive_json_from(timeout=5))["message"]["content"] == "one each"
    # then: their three session checks and three reads took fewer calls than six: what waited went together
    assert sum(batches) == 6 and len(batches) < 6
    for tab in tabs:
        await tab.disconnect()
