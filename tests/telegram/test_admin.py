"""Staff and Telegram: the links (never a chat's id) with a revoke action, the bot's health beside the
endpoints', and speech minutes in the cost report."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agent.models import TelegramLink
from agent.telegram import bot
from tests.support.factories import AIRequestFactory
from tests.support.telegram import connect, handled
from tests.support.telegram_api import FakeBotApi

pytestmark = pytest.mark.django_db
CHAT = 6123457


def staff(make_user: Any, *permissions: str) -> Client:
    client = Client()
    client.force_login(make_user("agent.manage_agent", *permissions, is_staff=True))
    return client


def test_staff_see_the_links_without_their_chat_and_revoke_them(bot_api: FakeBotApi, ref: Any, make_user: Any) -> None:
    link = connect(bot_api, ref, CHAT)
    client = staff(make_user)
    page = client.get(reverse("admin:agent_telegramlink_changelist"))
    assert page.status_code == 200 and "Ann" in page.content.decode()
    assert str(CHAT) not in page.content.decode()
    assert str(CHAT) not in client.get(reverse("admin:agent_telegramlink_change", args=[link.pk])).content.decode()
    done = client.post(
        reverse("admin:agent_telegramlink_changelist"), {"action": "revoke", "_selected_action": [link.pk]}, follow=True
    )
    assert "1 link revoked." in done.content.decode()
    assert TelegramLink.objects.get().revoked_at is not None


def test_the_links_are_for_managers_only(bot_api: FakeBotApi, make_user: Any) -> None:
    client = Client()
    client.force_login(make_user(is_staff=True))
    assert client.get(reverse("admin:agent_telegramlink_changelist")).status_code == 403


def test_the_health_page_shows_the_bots_last_update_and_failures(bot_api: FakeBotApi, make_user: Any) -> None:
    handled(bot_api.says(CHAT, "hello"))
    bot.note_error("rate_limited")
    page = staff(make_user).get(reverse("admin:agent_airequest_health")).content.decode()
    assert 'id="telegram-health"' in page and "@agent_test_bot (polling)" in page
    assert "no process reads" in page and "rate_limited" in page


def test_the_health_page_has_no_telegram_part_while_it_is_off(make_user: Any) -> None:
    assert 'id="telegram-health"' not in staff(make_user).get(reverse("admin:agent_airequest_health")).content.decode()


def test_the_cost_report_counts_minutes_of_speech(make_user: Any) -> None:
    user = make_user()
    AIRequestFactory(user=user, source="transcription", task="agent.transcribe", status="success", audio_seconds=90)
    AIRequestFactory(user=user, source="transcription", task="agent.transcribe", status="success", audio_seconds=30)
    page = staff(make_user).get(reverse("admin:agent_airequest_cost"))
    (row,) = [r for r in page.context["rows"] if r["user"] == user.username]
    assert row["speech_minutes"] == 2
    assert "speech (minutes)" in page.content.decode()
