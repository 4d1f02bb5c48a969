"""The event stream over HTTP (``agent:events``) through the test site's real ASGI stack and Redis layer.

It must send what the websocket sends for one chat, under the same rules: a
fresh scope per event, the periodic re-check, an ``error`` frame and nothing
else once the session is over, and no group or channel left behind.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings as django_settings
from django.contrib.sessions.models import Session
from django.test import Client

from agent import conversations
from agent.access import SessionRef
from agent.core import events
from agent.models import Conversation, Message
from tests.support.sessions import login
from tests.support.sockets import error_frame, parsed
from tests.support.streams import opened

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]

REDIS_URL = django_settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"]


def append(chat: Conversation, content: str, role: str = Message.Role.ASSISTANT) -> Message:
    return conversations.append_message(chat.pk, role=role, content=content)


def members(group: str) -> set[bytes]:
    """The channels in a group of the Redis layer, read from Redis itself."""
    store = redis.Redis.from_url(REDIS_URL)
    try:
        return set(store.zrange(f"asgi:group:{group}".encode(), 0, -1))
    finally:
        store.close()


# -- refusals, before any streaming -------------------------------------------------------------


async def test_an_anonymous_request_is_refused_session_gone(db: Any, chat: Conversation) -> None:
    stream = await opened(None, conversation=chat.pk)
    assert (stream.status, (await stream.body_json())["error"]) == (401, "session_gone")


@pytest.mark.parametrize("whose", ["another_user", "malformed", "missing"])
async def test_a_chat_not_yours_or_not_there_is_not_found(
    session: tuple[Client, SessionRef], others_chat: Conversation, whose: str
) -> None:
    conversation = {"another_user": others_chat.pk, "malformed": "../x", "missing": None}[whose]
    stream = await opened(session[0], conversation=conversation)
    assert (stream.status, (await stream.body_json())["error"]) == (404, "not_found")
    assert members(events.topic(others_chat.pk)) == set()


async def test_an_impersonated_session_is_refused(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    client = session[0]

    def impersonate() -> None:
        store = client.session
        store["hijack_history"] = ["1"]
        store.save()

    await database_sync_to_async(impersonate)()
    stream = await opened(client, conversation=chat.pk)
    assert (stream.status, (await stream.body_json())["error"]) == (401, "impersonated")


async def test_a_session_whose_row_is_gone_is_refused(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    client, ref = session
    await database_sync_to_async(Session.objects.filter(session_key=ref.session_key).delete)()
    stream = await opened(client, conversation=chat.pk)
    assert stream.status == 401 and (await stream.body_json())["error"] == "session_gone"


# -- what it sends ---------------------------------------------------------------------------


async def test_the_stream_opens_with_the_latest_messages_and_is_not_buffered(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    first = await database_sync_to_async(append)(chat, "one", Message.Role.USER)
    last = await database_sync_to_async(append)(chat, "two")
    stream = await opened(session[0], conversation=chat.pk)
    assert stream.status == 200
    assert stream.headers["content-type"] == "text/event-stream"
    assert "no-cache" in stream.headers["cache-control"] and stream.headers["x-accel-buffering"] == "no"
    event_id, frame = await stream.event()
    assert frame["type"] == "subscribed" and frame["conversation"] == str(chat.pk)
    assert [m["id"] for m in frame["messages"]] == [str(first.pk), str(last.pk)]
    assert event_id == str(last.pk)  # a browser that reconnects resumes after it
    await stream.close()


async def test_after_sends_only_the_newer_messages(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    first = await database_sync_to_async(append)(chat, "one", Message.Role.USER)
    await database_sync_to_async(append)(chat, "two")
    stream = await opened(session[0], conversation=chat.pk, after=first.pk)
    _event_id, frame = await stream.event()
    assert [m["content"] for m in frame["messages"]] == ["two"]
    await stream.close()


async def test_last_event_id_of_a_reconnecting_browser_wins_over_after(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    first = await database_sync_to_async(append)(chat, "one", Message.Role.USER)
    second = await database_sync_to_async(append)(chat, "two")
    await database_sync_to_async(append)(chat, "three")
    stream = await opened(session[0], headers={"Last-Event-ID": str(second.pk)}, conversation=chat.pk, after=first.pk)
    _event_id, frame = await stream.event()
    assert [m["content"] for m in frame["messages"]] == ["three"]
    await stream.close()


async def test_a_new_message_comes_as_the_websockets_frame_with_its_id(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    stream = await opened(client, conversation=chat.pk)
    assert (await stream.event())[1]["messages"] == []
    message = await database_sync_to_async(conversations.add_message)(
        ref, chat.pk, {"content": "new"}, impersonated=False
    )
    event_id, frame = await stream.event()
    view = await database_sync_to_async(conversations.get_message)(ref, chat.pk, message.pk, impersonated=False)
    assert (event_id, frame) == (str(message.pk), {"type": "message", "message": view})
    await stream.close()


async def test_a_message_the_first_frame_held_is_not_sent_again(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    stream = await opened(session[0], conversation=chat.pk)
    await stream.event()
    # given: an event for a message stored before the stream opened comes late
    old = await database_sync_to_async(append)(chat, "old")
    assert (await stream.event())[1]["message"]["id"] == str(old.pk)
    await get_channel_layer().group_send(
        events.topic(chat.pk), {"type": events.MESSAGE_ADDED, "conversation": str(chat.pk), "message": str(old.pk)}
    )
    # then
    assert await stream.nothing_for(0.5)
    await stream.close()


async def test_turn_changes_drafts_and_attachment_updates_come_as_the_websockets_frames(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    stream = await opened(session[0], conversation=chat.pk)
    await stream.event()
    layer, group, chat_id = get_channel_layer(), events.topic(chat.pk), str(chat.pk)
    await layer.group_send(
        group, {"type": events.TURN_CHANGED, "conversation": chat_id, "turn": "t", "status": "running"}
    )
    delta = {"type": events.ANSWER_DELTA, "conversation": chat_id, "turn": "t", "round": 1, "text": "- *Hel*"}
    await layer.group_send(group, delta)
    await layer.group_send(group, {"type": events.ATTACHMENT_PROCESSED, "conversation": chat_id, "attachment": "a"})
    assert [(await stream.event())[1] for _ in range(3)] == [
        {"type": "turn", "conversation": chat_id, "turn": "t", "status": "running"},
        {
            "type": "delta",
            "conversation": chat_id,
            "turn": "t",
            "round": 1,
            "text": "- *Hel*",
            "html": "<ul>\n<li><em>Hel</em></li>\n</ul>\n",
        },
        {"type": "attachment", "conversation": chat_id, "attachment": "a"},
    ]
    await stream.close()


async def test_a_deleted_chat_is_reported_gone_and_the_stream_ends(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    stream = await opened(client, conversation=chat.pk)
    await stream.event()
    await database_sync_to_async(conversations.delete_conversation)(ref, chat.pk, impersonated=False)
    assert (await stream.event())[1] == {"type": "conversation_gone", "conversation": str(chat.pk)}
    assert await stream.rest() == []


async def test_a_missing_message_event_tells_the_page_to_resync(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    stream = await opened(session[0], conversation=chat.pk)
    await stream.event()
    # given: the layer loses the event of the chat's next message (the stream's channel is out of the group)
    group = f"asgi:group:{events.topic(chat.pk)}".encode()
    store = redis.Redis.from_url(REDIS_URL)
    (channel,) = store.zrange(group, 0, -1)
    store.zrem(group, channel)
    await database_sync_to_async(append)(chat, "lost on the way")
    assert await sync_to_async(events.flush)()  # its event went to the group while the stream was out of it
    store.zadd(group, {channel: time.time()})
    store.close()
    # when
    await database_sync_to_async(append)(chat, "the next one")
    # then: the page is told to open the stream again from the last message it has; nothing after the hole
    assert (await stream.event())[1] == {"type": "ready", "resync": str(chat.pk)}
    assert await stream.rest() == []


async def test_a_comment_line_keeps_an_idle_stream_open(
    session: tuple[Client, SessionRef], chat: Conversation, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "EVENTS_KEEPALIVE_S": 1}
    stream = await opened(session[0], conversation=chat.pk)
    await stream.event()
    assert await stream.block(timeout=3) == ": keepalive"
    assert await stream.block(timeout=3) == ": keepalive"
    await stream.close()


# -- a session that ends -----------------------------------------------------------------------


async def test_a_logged_out_session_gets_an_error_frame_and_nothing_else(
    session: tuple[Client, SessionRef], chat: Conversation, stale_checks: Callable[[], None]
) -> None:
    client, ref = session
    stream = await opened(client, conversation=chat.pk)
    await stream.event()
    # given: every check so far is older than the freshness the stream needs before content
    stale_checks()
    # when: the session row goes without a signal, and content follows
    await database_sync_to_async(Session.objects.filter(session_key=ref.session_key).delete)()
    await database_sync_to_async(append)(chat, "secret answer")
    delta = {"type": events.ANSWER_DELTA, "conversation": str(chat.pk), "turn": "t", "round": 1, "text": "secret"}
    await get_channel_layer().group_send(events.topic(chat.pk), delta)
    # then
    blocks = await stream.rest()
    assert parsed(blocks) == [error_frame("session_gone")]


async def test_a_logout_ends_the_stream_at_once(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    client, _ref = session
    stream = await opened(client, conversation=chat.pk)
    await stream.event()
    await database_sync_to_async(client.logout)()
    assert parsed(await stream.rest(timeout=2)) == [error_frame("session_gone")]
    assert members(events.topic(chat.pk)) == set()  # a stream the server ends leaves its groups too


async def test_an_idle_stream_checks_its_session_again(
    session: tuple[Client, SessionRef], chat: Conversation, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "SOCKET_RECHECK_S": 1}
    client, ref = session
    stream = await opened(client, conversation=chat.pk)
    await stream.event()
    await database_sync_to_async(Session.objects.filter(session_key=ref.session_key).delete)()
    assert parsed(await stream.rest(timeout=4)) == [error_frame("session_gone")]


# -- the client goes away --------------------------------------------------------------------


async def test_a_client_that_goes_away_leaves_every_group_and_its_channel(make_user: Any) -> None:
    client, ref = await database_sync_to_async(login)(await database_sync_to_async(make_user)())
    chat = await database_sync_to_async(conversations.create_conversation)(ref, {}, impersonated=False)
    groups = [events.topic(chat.pk), ref.group, events.user_group(ref.user_id)]
    stream = await opened(client, conversation=chat.pk)
    await stream.event()
    (channel,) = members(events.topic(chat.pk))
    assert all(members(group) == {channel} for group in groups)
    # when
    await stream.close()
    # then: no group holds the channel, and an event sent after leaves nothing buffered in the process
    assert all(channel not in members(group) for group in [*groups, events.SITE_GROUP])
    await database_sync_to_async(append)(chat, "after it left")
    assert await sync_to_async(events.flush)()
    assert channel.decode() not in get_channel_layer().receive_buffer
