""" "My assistant" over HTTP: connecting Telegram by a one-time link, the chats connected, disconnecting one;
the user's own speech model from the allow-list."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from agent.models import AgentSettings, TelegramLink
from tests.support.factories import EndpointFactory
from tests.support.sessions import csrf_client
from tests.support.telegram import connect, handled
from tests.support.telegram_api import FakeBotApi

pytestmark = pytest.mark.django_db


def test_the_panel_connects_telegram_and_disconnects_it(bot_api: FakeBotApi, user: Any, ref: Any) -> None:
    client, token = csrf_client(user)
    assert client.get(reverse("agent:assistant_api")).json()["telegram"] == {
        "offered": True,
        "bot": "agent_test_bot",
        "links": [],
    }
    invite = client.post(reverse("agent:telegram_link"), {}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert invite.status_code == 200 and invite.json()["expires_in"] == 600
    url = invite.json()["url"]
    assert url.startswith("https://t.me/agent_test_bot?start=")
    handled(bot_api.says(4242, "/start " + url.split("start=")[1]))
    (shown,) = client.get(reverse("agent:assistant_api")).json()["telegram"]["links"]
    assert shown["name"] == "Ann" and "4242" not in str(shown)  # the chat's id stays on the server
    revoked = client.post(
        reverse("agent:telegram_revoke"), {"link": shown["id"]}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert revoked.status_code == 200 and revoked.json()["telegram"]["links"] == []
    assert TelegramLink.objects.get().revoked_at is not None


def test_the_link_needs_the_pages_csrf_token(bot_api: FakeBotApi, user: Any) -> None:
    client, _token = csrf_client(user)
    refused = client.post(reverse("agent:telegram_link"), {}, content_type="application/json")
    assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"


def test_telegram_is_not_offered_without_the_permission(bot_api: FakeBotApi, no_telegram_user: Any) -> None:
    client, token = csrf_client(no_telegram_user)
    assert client.get(reverse("agent:assistant_api")).json()["telegram"]["offered"] is False
    refused = client.post(reverse("agent:telegram_link"), {}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert refused.status_code == 403 and refused.json()["error"] == "telegram_not_offered"
    assert "connect-telegram" not in client.get(reverse("agent:chat")).content.decode()


def test_the_chat_page_leads_to_telegram_where_it_is_offered(bot_api: FakeBotApi, user: Any, ref: Any) -> None:
    client, _token = csrf_client(user)
    page = client.get(reverse("agent:chat")).content.decode()
    assert 'id="connect-telegram"' in page and reverse("agent:assistant") + "#telegram" in page


def test_another_users_link_is_not_disconnected(bot_api: FakeBotApi, user: Any, ref: Any, make_user: Any) -> None:
    link = connect(bot_api, ref, 4242)
    other, token = csrf_client(make_user("agent.use_telegram"))
    other.post(
        reverse("agent:telegram_revoke"), {"link": link.pk}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert TelegramLink.objects.get().revoked_at is None


def test_a_user_picks_a_speech_model_only_one_that_transcribes(user: Any, db: Any) -> None:
    hears = EndpointFactory(name="hears", base_url="http://x/v1", model="whisper-1", supports_transcription=True)
    deaf = EndpointFactory(name="deaf", base_url="http://x/v1", model="chat")
    site = AgentSettings.current()
    site.selectable_endpoints.add(hears, deaf)
    client, token = csrf_client(user)
    url = reverse("agent:assistant_api")
    refused = client.post(url, {"speech_endpoint": deaf.pk}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert refused.status_code == 400 and "speech_endpoint" in refused.json()["fields"]
    saved = client.post(url, {"speech_endpoint": hears.pk}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert saved.status_code == 200
    data = saved.json()
    assert data["picker"]["speech_endpoint"] == hears.pk
    assert data["models"]["speech"]["endpoint"]["name"] == "hears" and data["models"]["speech"]["source"] == "personal"
