"""The websocket speaks the user's language: their setting, else the socket request's cookie or header."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.utils import translation

from agent import notices
from agent.conversations import create_conversation
from agent.routing import websocket_urlpatterns
from agent.web.consumers import request_language
from tests.support.factories import UserSettingsFactory


def test_the_language_cookie_comes_first():
    scope = {"cookies": {settings.LANGUAGE_COOKIE_NAME: "et"}, "headers": [(b"accept-language", b"ru")]}
    assert request_language(scope) == "et"


def test_without_a_cookie_accept_language_decides_by_quality():
    scope = {"cookies": {}, "headers": [(b"accept-language", b"de;q=0.9, ru;q=0.8, en;q=0.5")]}
    assert request_language(scope) == "ru"


def test_a_regional_variant_maps_to_the_site_language():
    assert request_language({"headers": [(b"accept-language", b"ru-RU")]}) == "ru"


def test_unknown_languages_give_none():
    scope = {"cookies": {settings.LANGUAGE_COOKIE_NAME: "xx"}, "headers": [(b"accept-language", b"*")]}
    assert request_language(scope) is None


def _subscribed_notice(session_key: str, chat_id: Any, cookie_language: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        cookie = f"{settings.SESSION_COOKIE_NAME}={session_key}; {settings.LANGUAGE_COOKIE_NAME}={cookie_language}"
        app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        headers = [(b"cookie", cookie.encode()), (b"host", b"testserver"), (b"origin", b"http://testserver")]
        socket = WebsocketCommunicator(app, "/ws/agent/", headers=headers)
        connected, _ = await socket.connect()
        assert connected and (await socket.receive_json_from(timeout=5))["type"] == "ready"
        await socket.send_json_to({"type": "subscribe", "conversation": str(chat_id), "after": None, "ref": 1})
        reply = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return reply["messages"][-1]

    return async_to_sync(run)()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("own, cookie, expected", [("", "ru", "ru"), ("en", "ru", "en")])
def test_subscribed_notices_are_in_the_users_language(session, user, own, cookie, expected):
    client, ref = session
    if own:
        UserSettingsFactory(user=user, language=own)
    chat = create_conversation(ref, {}, impersonated=False)
    notices.write(chat.pk, "stopped")
    notice = _subscribed_notice(ref.session_key, chat.pk, cookie)
    with translation.override(expected):
        wanted = notices.text("stopped")
    assert notice["notice_code"] == "stopped"
    if expected == "ru":
        assert wanted != "Stopped.", "the ru catalogue translates the notice"
    assert notice["notice_text"] == wanted
