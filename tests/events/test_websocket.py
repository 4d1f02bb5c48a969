"""The chat page's websocket (SPEC §10) through the site's real ASGI stack and Redis layer.

The socket is opened against ``tests.asgi.application`` (origin
validator, session and auth middleware) with a real session cookie.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import Permission
from django.contrib.sessions.models import Session
from django.test import Client

from agent import conversations
from agent.access import SessionRef
from agent.models import AgentSettings, Conversation, Message, UserSettings
from tests.asgi import application
from tests.conftest import login

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]

ORIGIN = "http://testserver"


def socket(client: Client | None = None, *, origin: str | None = ORIGIN) -> WebsocketCommunicator:
    headers = [(b"host", b"testserver")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if client is not None:
        key = client.cookies[settings.SESSION_COOKIE_NAME].value
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={key}".encode()))
    return WebsocketCommunicator(application, "/ws/agent/", headers=headers)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(scenario)()


async def opened(client: Client) -> WebsocketCommunicator:
    """A socket of ``client``'s session that the server said ready on."""
    ws = socket(client)
    connected, _ = await ws.connect(timeout=5)
    assert connected
    assert await ws.receive_json_from(timeout=5) == {"type": "ready"}
    return ws


async def close_code(ws: WebsocketCommunicator, within: float) -> tuple[int, list[str]]:
    """Read until the server closes; the close code and the text frames sent before it."""
    frames: list[str] = []
    deadline = time.monotonic() + within
    while True:
        output = await ws.receive_output(timeout=max(deadline - time.monotonic(), 0.01))
        if output["type"] == "websocket.close":
            return output.get("code"), frames
        frames.append(output.get("text"))


async def finish_refused(ws: WebsocketCommunicator) -> None:
    """End a socket the server refused; its consumer holds no groups, so don't wait the full second."""
    await ws.disconnect(timeout=0.1)


async def subscribed(ws: WebsocketCommunicator, chat: Conversation) -> dict[str, Any]:
    await ws.send_json_to({"type": "subscribe", "conversation": str(chat.pk), "ref": "s1"})
    reply = await ws.receive_json_from(timeout=5)
    assert reply["type"] == "subscribed", reply
    return reply


@pytest.fixture
def chat(ref: SessionRef) -> Conversation:
    chat = conversations.create_conversation(ref, {}, impersonated=False)
    conversations.add_message(ref, chat.pk, {"content": "earlier"}, impersonated=False)
    return chat


# -- connect ---------------------------------------------------------------------------------


def test_a_live_session_is_told_ready(session: tuple[Client, SessionRef]) -> None:
    async def scenario() -> None:
        ws = await opened(session[0])
        await ws.disconnect()

    run(scenario)


def test_an_anonymous_socket_is_closed_4401(db: Any) -> None:
    async def scenario() -> None:
        ws = socket()
        await ws.connect(timeout=5)
        code, frames = await close_code(ws, within=5)
        assert code == 4401 and frames == ['{"type": "error", "error": "session_gone"}']
        await finish_refused(ws)

    run(scenario)


@pytest.mark.parametrize("origin", ["http://evil.example", None], ids=["foreign", "missing"])
def test_a_socket_from_a_foreign_or_no_origin_is_rejected(
    session: tuple[Client, SessionRef], origin: str | None
) -> None:
    async def scenario() -> None:
        ws = socket(session[0], origin=origin)
        connected, _ = await ws.connect(timeout=5)
        assert not connected
        await finish_refused(ws)

    run(scenario)


def test_an_impersonated_session_is_refused_at_connect(session: tuple[Client, SessionRef]) -> None:
    client = session[0]
    store = client.session
    store["hijack_history"] = ["1"]
    store.save()

    async def scenario() -> None:
        ws = socket(client)
        await ws.connect(timeout=5)
        code, frames = await close_code(ws, within=5)
        assert code == 4401 and frames == ['{"type": "error", "error": "impersonated"}']
        await finish_refused(ws)

    run(scenario)


def test_a_session_without_the_permission_is_refused_at_connect(make_user: Callable[..., Any]) -> None:
    user = make_user()
    user.user_permissions.clear()
    client, _ref = login(user)

    async def scenario() -> None:
        ws = socket(client)
        await ws.connect(timeout=5)
        code, frames = await close_code(ws, within=5)
        assert code == 4401 and frames == ['{"type": "error", "error": "forbidden"}']
        await finish_refused(ws)

    run(scenario)


# -- frames ------------------------------------------------------------------------------------


def test_subscribing_to_an_own_chat_answers_subscribed_with_the_latest_messages(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    async def scenario() -> None:
        ws = await opened(session[0])
        reply = await subscribed(ws, chat)
        assert reply["conversation"] == str(chat.pk) and reply["ref"] == "s1"
        assert [m["content"] for m in reply["messages"]] == ["earlier"]
        await ws.disconnect()

    run(scenario)


def test_subscribing_to_another_users_chat_answers_not_found(
    session: tuple[Client, SessionRef], others_chat: Conversation
) -> None:
    async def scenario() -> None:
        ws = await opened(session[0])
        await ws.send_json_to({"type": "subscribe", "conversation": str(others_chat.pk), "ref": 7})
        assert await ws.receive_json_from(timeout=5) == {"type": "error", "error": "not_found", "ref": 7}
        await sync_to_async(conversations.append_message)(others_chat.pk, role=Message.Role.USER, content="theirs")
        assert await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()

    run(scenario)


def test_a_message_added_after_subscribe_reaches_the_socket_as_its_client_view(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    ref = session[1]

    async def scenario() -> None:
        ws = await opened(session[0])
        await subscribed(ws, chat)
        message = await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
        frame = await ws.receive_json_from(timeout=2)
        view = await sync_to_async(conversations.get_message)(ref, chat.pk, message.pk, impersonated=False)
        assert frame == {"type": "message", "message": view}
        await ws.disconnect()

    run(scenario)


def test_a_chat_subscribed_by_an_upper_case_id_still_gets_its_messages(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    ref = session[1]

    async def scenario() -> None:
        ws = await opened(session[0])
        await ws.send_json_to({"type": "subscribe", "conversation": str(chat.pk).upper()})
        assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
        await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
        frame = await ws.receive_json_from(timeout=2)
        assert frame["type"] == "message" and frame["message"]["content"] == "new"
        await ws.disconnect()

    run(scenario)


def test_unsubscribing_by_an_upper_case_id_stops_the_messages(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    ref = session[1]

    async def scenario() -> None:
        ws = await opened(session[0])
        await subscribed(ws, chat)
        await ws.send_json_to({"type": "unsubscribe", "conversation": str(chat.pk).upper()})
        assert (await ws.receive_json_from(timeout=5))["type"] == "unsubscribed"
        await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
        assert await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()

    run(scenario)


@pytest.mark.parametrize("conversation", ["../", "x" * 300, None, 5], ids=["dotdot", "long", "none", "int"])
def test_unsubscribing_a_malformed_id_answers_not_found_and_the_socket_stays(
    session: tuple[Client, SessionRef], chat: Conversation, conversation: Any
) -> None:
    async def scenario() -> None:
        ws = await opened(session[0])
        await ws.send_json_to({"type": "unsubscribe", "conversation": conversation, "ref": 1})
        assert await ws.receive_json_from(timeout=5) == {"type": "error", "error": "not_found", "ref": 1}
        await subscribed(ws, chat)
        await ws.disconnect()

    run(scenario)


def test_an_unsubscribed_socket_hears_no_more_messages(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    ref = session[1]

    async def scenario() -> None:
        ws = await opened(session[0])
        await subscribed(ws, chat)
        await ws.send_json_to({"type": "unsubscribe", "conversation": str(chat.pk)})
        assert (await ws.receive_json_from(timeout=5))["type"] == "unsubscribed"
        await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "new"}, impersonated=False)
        assert await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()

    run(scenario)


def test_a_message_event_after_the_session_silently_ended_closes_instead_of_delivering(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, ref = session

    async def scenario() -> None:
        ws = await opened(client)
        await subscribed(ws, chat)
        await sync_to_async(Session.objects.filter(session_key=ref.session_key).delete)()
        await sync_to_async(conversations.append_message)(chat.pk, role=Message.Role.ASSISTANT, content="secret answer")
        code, frames = await close_code(ws, within=2)
        assert code == 4401 and not any("secret answer" in f for f in frames)
        await ws.disconnect()

    run(scenario)


def test_an_oversize_frame_closes_4413(session: tuple[Client, SessionRef]) -> None:
    async def scenario() -> None:
        ws = await opened(session[0])
        await ws.send_to(text_data="x" * (64 * 1024 + 1))
        code, _frames = await close_code(ws, within=5)
        assert code == 4413
        await ws.disconnect()

    run(scenario)


def test_too_many_frames_close_4429(session: tuple[Client, SessionRef], settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "WS_FRAMES_PER_10S": 3}

    async def scenario() -> None:
        ws = await opened(session[0])
        for _ in range(4):
            await ws.send_json_to({"type": "launch"})
        code, frames = await close_code(ws, within=5)
        assert code == 4429 and len(frames) == 3
        await ws.disconnect()

    run(scenario)


def test_a_chat_deleted_while_subscribed_is_reported_gone(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    ref = session[1]

    async def scenario() -> None:
        ws = await opened(session[0])
        await subscribed(ws, chat)
        await sync_to_async(conversations.delete_conversation)(ref, chat.pk, impersonated=False)
        assert await ws.receive_json_from(timeout=2) == {"type": "conversation_gone", "conversation": str(chat.pk)}
        await ws.disconnect()

    run(scenario)


def test_a_renamed_chat_is_reported_with_its_new_title(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    ref = session[1]

    async def scenario() -> None:
        ws = await opened(session[0])
        await subscribed(ws, chat)
        await sync_to_async(conversations.rename_conversation)(ref, chat.pk, "Renamed", impersonated=False)
        frame = await ws.receive_json_from(timeout=2)
        assert frame["type"] == "conversation" and frame["conversation"]["title"] == "Renamed"
        await ws.disconnect()

    run(scenario)


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"a string"'], ids=["garbage", "list", "string"])
def test_a_frame_that_is_not_a_json_object_gets_bad_frame_and_the_socket_stays(
    session: tuple[Client, SessionRef], chat: Conversation, text: str
) -> None:
    async def scenario() -> None:
        ws = await opened(session[0])
        await ws.send_to(text_data=text)
        assert await ws.receive_json_from(timeout=5) == {"type": "error", "error": "bad_frame"}
        await subscribed(ws, chat)
        await ws.disconnect()

    run(scenario)


def test_an_unknown_frame_type_gets_bad_frame(session: tuple[Client, SessionRef]) -> None:
    async def scenario() -> None:
        ws = await opened(session[0])
        await ws.send_json_to({"type": "launch", "ref": 3})
        assert await ws.receive_json_from(timeout=5) == {"type": "error", "error": "bad_frame", "ref": 3}
        await ws.disconnect()

    run(scenario)


# -- revocations close open sockets within a second -----------------------------------------------


def _log_out(client: Client, user: Any) -> None:
    client.logout()


def _change_password(client: Client, user: Any) -> None:
    user.set_password("another-password")
    user.save()


def _deactivate(client: Client, user: Any) -> None:
    user.is_active = False
    user.save()


def _remove_permission(client: Client, user: Any) -> None:
    user.user_permissions.remove(Permission.objects.get(content_type__app_label="agent", codename="use_agent"))


def _switch_assistant_off(client: Client, user: Any) -> None:
    row = AgentSettings.current()
    row.enabled = False
    row.save()


def _switch_user_off(client: Client, user: Any) -> None:
    UserSettings.objects.update_or_create(user=user, defaults={"enabled": False})


REVOCATIONS = {
    "logout": (_log_out, "session_gone"),
    "password_changed": (_change_password, "session_gone"),
    "deactivated": (_deactivate, "inactive"),
    "permission_removed": (_remove_permission, "forbidden"),
    "assistant_switched_off": (_switch_assistant_off, "forbidden"),
    "user_switched_off": (_switch_user_off, "forbidden"),
}


@pytest.mark.parametrize("revocation", REVOCATIONS)
def test_a_revocation_closes_the_open_socket_4401_within_a_second(
    session: tuple[Client, SessionRef], user: Any, chat: Conversation, revocation: str
) -> None:
    client = session[0]
    revoke, code_sent = REVOCATIONS[revocation]

    async def scenario() -> None:
        ws = await opened(client)
        await subscribed(ws, chat)
        started = time.monotonic()
        await sync_to_async(revoke)(client, user)
        code, frames = await close_code(ws, within=1.0)
        assert code == 4401 and time.monotonic() - started < 1.0
        assert frames == [f'{{"type": "error", "error": "{code_sent}"}}']
        await ws.disconnect()

    run(scenario)


def test_a_logout_does_not_close_another_sessions_socket(
    session: tuple[Client, SessionRef], user: Any, chat: Conversation
) -> None:
    other_client, _ref = login(user)

    async def scenario() -> None:
        ws = await opened(other_client)
        await sync_to_async(session[0].logout)()
        assert await ws.receive_nothing(timeout=0.5)
        await subscribed(ws, chat)
        await ws.disconnect()

    run(scenario)
