"""The chat page's websocket through the test site's real ASGI stack and Redis layer.

The socket is opened against ``tests.asgi.application`` (origin validator,
session and auth middleware) with a real session cookie.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from asgiref.sync import sync_to_async
from django.contrib.sessions.models import Session
from django.test import Client

from agent import conversations
from agent.access import SessionRef
from agent.models import Conversation, Message
from agent.web.shared_reads import SCOPE_FRESH_S
from tests.support.sessions import login
from tests.support.sockets import close_code, error_frame, finish_refused, opened, parsed, socket, subscribed

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]


# -- connect ---------------------------------------------------------------------------------


async def test_a_live_session_is_told_ready(session: tuple[Client, SessionRef]) -> None:
    ws = await opened(session[0])
    await ws.disconnect()


async def test_an_anonymous_socket_is_closed_4401(db: Any) -> None:
    ws = socket()
    await ws.connect(timeout=5)
    code, frames = await close_code(ws, within=5)
    assert code == 4401 and parsed(frames) == [error_frame("session_gone")]
    await finish_refused(ws)


@pytest.mark.parametrize("origin", ["http://evil.example", None], ids=["foreign", "missing"])
async def test_a_socket_from_a_foreign_or_no_origin_is_rejected(
    session: tuple[Client, SessionRef], origin: str | None
) -> None:
    ws = socket(session[0], origin=origin)
    connected, _ = await ws.connect(timeout=5)
    assert not connected
    await finish_refused(ws)


@pytest.mark.parametrize(
    "origin", ["http://testserver:8503", "https://testserver", "http://localhost"], ids=["port", "scheme", "host"]
)
async def test_a_socket_from_another_port_scheme_or_host_of_the_site_is_refused(
    session: tuple[Client, SessionRef], origin: str
) -> None:
    ws = socket(session[0], origin=origin)
    connected, _ = await ws.connect(timeout=5)
    assert not connected
    await finish_refused(ws)


async def test_a_trusted_origin_of_another_port_may_open_a_socket(
    session: tuple[Client, SessionRef], settings: Any
) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["http://testserver:8503"]
    ws = socket(session[0], origin="http://testserver:8503")
    connected, _ = await ws.connect(timeout=5)
    assert connected and await ws.receive_json_from(timeout=5) == {"type": "ready"}
    await ws.disconnect()


async def test_a_secure_socket_takes_the_https_origin_only(session: tuple[Client, SessionRef]) -> None:
    plain = socket(session[0], origin="http://testserver")
    plain.scope["scheme"] = "wss"
    assert not (await plain.connect(timeout=5))[0]
    await finish_refused(plain)
    secure = socket(session[0], origin="https://testserver")
    secure.scope["scheme"] = "wss"
    assert (await secure.connect(timeout=5))[0]
    assert await secure.receive_json_from(timeout=5) == {"type": "ready"}
    await secure.disconnect()


async def test_behind_a_tls_proxy_the_https_origin_is_the_sites_own(
    session: tuple[Client, SessionRef], settings: Any
) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    ws = socket(session[0], origin="https://testserver")
    ws.scope["headers"].append((b"x-forwarded-proto", b"https"))
    assert (await ws.connect(timeout=5))[0]
    assert await ws.receive_json_from(timeout=5) == {"type": "ready"}
    await ws.disconnect()


async def test_an_impersonated_session_is_refused_at_connect(session: tuple[Client, SessionRef]) -> None:
    client = session[0]

    def impersonate() -> None:
        store = client.session
        store["hijack_history"] = ["1"]
        store.save()

    await sync_to_async(impersonate)()
    ws = socket(client)
    await ws.connect(timeout=5)
    code, frames = await close_code(ws, within=5)
    assert code == 4401 and parsed(frames) == [error_frame("impersonated")]
    await finish_refused(ws)


async def test_a_session_without_the_permission_is_refused_at_connect(make_user: Callable[..., Any]) -> None:
    user = await sync_to_async(make_user)()
    await sync_to_async(user.user_permissions.clear)()
    client, _ref = await sync_to_async(login)(user)
    ws = socket(client)
    await ws.connect(timeout=5)
    code, frames = await close_code(ws, within=5)
    assert code == 4401 and parsed(frames) == [error_frame("forbidden")]
    await finish_refused(ws)


# -- frames ------------------------------------------------------------------------------------


async def test_subscribing_to_an_own_chat_answers_subscribed_with_the_latest_messages(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "earlier"}, impersonated=False)
    ws = await opened(client)
    reply = await subscribed(ws, chat)
    assert reply["conversation"] == str(chat.pk) and reply["ref"] == "s1"
    assert [m["content"] for m in reply["messages"]] == ["earlier"]
    await ws.disconnect()


async def test_subscribing_to_another_users_chat_answers_not_found(
    session: tuple[Client, SessionRef], others_chat: Conversation
) -> None:
    ws = await opened(session[0])
    await ws.send_json_to({"type": "subscribe", "conversation": str(others_chat.pk), "ref": 7})
    assert await ws.receive_json_from(timeout=5) == error_frame("not_found", ref=7)
    await sync_to_async(conversations.append_message)(others_chat.pk, role=Message.Role.USER, content="theirs")
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


async def test_a_message_added_after_subscribe_reaches_the_socket_as_its_client_view(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    ws = await opened(client)
    await subscribed(ws, chat)
    message = await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
    frame = await ws.receive_json_from(timeout=2)
    view = await sync_to_async(conversations.get_message)(ref, chat.pk, message.pk, impersonated=False)
    assert frame == {"type": "message", "message": view}
    await ws.disconnect()


async def test_a_chat_subscribed_by_an_upper_case_id_still_gets_its_messages(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    ws = await opened(client)
    await ws.send_json_to({"type": "subscribe", "conversation": str(chat.pk).upper()})
    assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
    await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
    frame = await ws.receive_json_from(timeout=2)
    assert frame["type"] == "message" and frame["message"]["content"] == "new"
    await ws.disconnect()


async def test_unsubscribing_by_an_upper_case_id_stops_the_messages(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    ws = await opened(client)
    await subscribed(ws, chat)
    await ws.send_json_to({"type": "unsubscribe", "conversation": str(chat.pk).upper()})
    assert (await ws.receive_json_from(timeout=5))["type"] == "unsubscribed"
    await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


@pytest.mark.parametrize("conversation", ["../", "x" * 300, None, 5], ids=["dotdot", "long", "none", "int"])
async def test_unsubscribing_a_malformed_id_answers_not_found_and_the_socket_stays(
    session: tuple[Client, SessionRef], chat: Conversation, conversation: Any
) -> None:
    ws = await opened(session[0])
    await ws.send_json_to({"type": "unsubscribe", "conversation": conversation, "ref": 1})
    assert await ws.receive_json_from(timeout=5) == error_frame("not_found", ref=1)
    await subscribed(ws, chat)
    await ws.disconnect()


async def test_an_unsubscribed_socket_hears_no_more_messages(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    ws = await opened(client)
    await subscribed(ws, chat)
    await ws.send_json_to({"type": "unsubscribe", "conversation": str(chat.pk)})
    assert (await ws.receive_json_from(timeout=5))["type"] == "unsubscribed"
    await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


async def test_a_message_event_after_the_session_silently_ended_closes_instead_of_delivering(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    ws = await opened(client)
    await subscribed(ws, chat)
    # given: every check so far is older than the freshness a socket needs before content
    await ws.receive_nothing(timeout=SCOPE_FRESH_S + 0.1)
    # when: the session row goes without a signal, and a message follows
    await sync_to_async(Session.objects.filter(session_key=ref.session_key).delete)()
    await sync_to_async(conversations.append_message)(chat.pk, role=Message.Role.ASSISTANT, content="secret answer")
    # then
    code, frames = await close_code(ws, within=2)
    assert code == 4401 and not any("secret answer" in f for f in frames)
    await ws.disconnect()


async def test_an_oversize_frame_closes_4413(session: tuple[Client, SessionRef]) -> None:
    ws = await opened(session[0])
    await ws.send_to(text_data="x" * (64 * 1024 + 1))
    code, _frames = await close_code(ws, within=5)
    assert code == 4413
    await ws.disconnect()


async def test_a_frame_over_the_byte_limit_in_multibyte_characters_closes_4413(
    session: tuple[Client, SessionRef], settings: Any
) -> None:
    # given: 400 characters of Cyrillic, 800 bytes of UTF-8, against a 600-byte limit
    settings.AGENT = {**settings.AGENT, "WS_MAX_FRAME_BYTES": 600}
    ws = await opened(session[0])
    text = '{"type": "send", "text": "' + "ж" * 400 + '"}'
    assert len(text) < 600 < len(text.encode())
    await ws.send_to(text_data=text)
    code, _frames = await close_code(ws, within=5)
    assert code == 4413
    await ws.disconnect()


async def test_too_many_frames_close_4429(session: tuple[Client, SessionRef], settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "WS_FRAMES_PER_10S": 3}
    ws = await opened(session[0])
    for _ in range(4):
        await ws.send_json_to({"type": "launch"})
    code, frames = await close_code(ws, within=5)
    assert code == 4429 and len(frames) == 3
    await ws.disconnect()


async def test_a_chat_deleted_while_subscribed_is_reported_gone(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    ws = await opened(client)
    await subscribed(ws, chat)
    await sync_to_async(conversations.delete_conversation)(ref, chat.pk, impersonated=False)
    assert await ws.receive_json_from(timeout=2) == {"type": "conversation_gone", "conversation": str(chat.pk)}
    await ws.disconnect()


async def test_a_renamed_chat_is_reported_with_its_new_title(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session
    ws = await opened(client)
    await subscribed(ws, chat)
    await sync_to_async(conversations.rename_conversation)(ref, chat.pk, "Renamed", impersonated=False)
    frame = await ws.receive_json_from(timeout=2)
    assert frame["type"] == "conversation" and frame["conversation"]["title"] == "Renamed"
    await ws.disconnect()


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"a string"'], ids=["garbage", "list", "string"])
async def test_a_frame_that_is_not_a_json_object_gets_bad_frame_and_the_socket_stays(
    session: tuple[Client, SessionRef], chat: Conversation, text: str
) -> None:
    ws = await opened(session[0])
    await ws.send_to(text_data=text)
    assert await ws.receive_json_from(timeout=5) == error_frame("bad_frame")
    await subscribed(ws, chat)
    await ws.disconnect()


async def test_a_frame_nested_too_deep_gets_bad_frame_and_the_socket_stays(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    ws = await opened(session[0])
    await ws.send_to(text_data="[" * 60_000)
    assert await ws.receive_json_from(timeout=5) == error_frame("bad_frame")
    await subscribed(ws, chat)
    await ws.disconnect()


async def test_an_unknown_frame_type_gets_bad_frame(session: tuple[Client, SessionRef]) -> None:
    ws = await opened(session[0])
    await ws.send_json_to({"type": "launch", "ref": 3})
    assert await ws.receive_json_from(timeout=5) == error_frame("bad_frame", ref=3)
    await ws.disconnect()
