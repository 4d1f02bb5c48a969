"""Linking a Telegram chat: a one-time token from the page, ``/start`` in a private chat, one live link
per chat, revoked from the page, from Telegram or by staff; refused politely in the user's language."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone, translation
from django.utils.translation import gettext

from agent.access import SessionRef, TelegramRef, authorize_session
from agent.core import errors
from agent.models import TelegramLink, TelegramLinkToken
from agent.telegram import link_token, link_url, live_links, revoke
from tests.support.sessions import login
from tests.support.telegram import connect, handled
from tests.support.telegram_api import FakeBotApi

pytestmark = pytest.mark.django_db
CHAT = 5001


def test_a_token_is_short_url_safe_single_use_and_opens_the_bot(bot_api: FakeBotApi, ref: SessionRef) -> None:
    token = link_token(ref, impersonated=False)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", token)
    assert link_url(token) == f"https://t.me/agent_test_bot?start={token}"
    assert not TelegramLinkToken.objects.filter(digest=token).exists()  # only its digest is kept


def test_start_with_a_valid_token_links_the_chat_and_says_so(bot_api: FakeBotApi, ref: SessionRef, user: Any) -> None:
    link = connect(bot_api, ref, CHAT)
    assert (link.user_id, link.chat_id, link.name) == (user.pk, CHAT, "Ann")
    assert "Connected" in bot_api.texts(CHAT)[-1]
    assert authorize_session(TelegramRef(link.pk, user.pk), impersonated=False).user_id == user.pk
    assert [lk.pk for lk in live_links(ref, impersonated=False)] == [link.pk]


def test_a_used_token_links_nothing_more(bot_api: FakeBotApi, ref: SessionRef) -> None:
    token = link_token(ref, impersonated=False)
    handled(bot_api.says(CHAT, f"/start {token}"))
    handled(bot_api.says(CHAT + 1, f"/start {token}"))
    assert list(TelegramLink.objects.values_list("chat_id", flat=True)) == [CHAT]
    assert "it was used, or it expired" in bot_api.texts(CHAT + 1)[-1]


def test_an_expired_token_links_nothing(bot_api: FakeBotApi, ref: SessionRef) -> None:
    token = link_token(ref, impersonated=False)
    TelegramLinkToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    handled(bot_api.says(CHAT, f"/start {token}"))
    assert not TelegramLink.objects.exists()
    assert "expired" in bot_api.texts(CHAT)[-1]


def test_a_made_up_token_links_nothing(bot_api: FakeBotApi, ref: SessionRef) -> None:
    link_token(ref, impersonated=False)
    handled(bot_api.says(CHAT, "/start AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"))
    assert not TelegramLink.objects.exists()


def test_a_chat_linked_to_someone_else_is_not_taken_over(bot_api: FakeBotApi, ref: SessionRef, make_user: Any) -> None:
    connect(bot_api, ref, CHAT)
    _client, other = login(make_user("agent.use_telegram"))
    handled(bot_api.says(CHAT, f"/start {link_token(other, impersonated=False)}"))
    assert list(TelegramLink.objects.values_list("user_id", flat=True)) == [ref.user_id]
    assert "already connected" in bot_api.texts(CHAT)[-1]


def test_a_group_chat_is_never_linked(bot_api: FakeBotApi, ref: SessionRef) -> None:
    token = link_token(ref, impersonated=False)
    handled(bot_api.says(-100200, f"/start {token}", chat_type="group"))
    assert not TelegramLink.objects.exists()
    assert "private chat" in bot_api.texts(-100200)[-1]
    assert TelegramLinkToken.objects.get().used_at is None  # still good for the private chat


def test_a_user_without_the_telegram_permission_gets_no_token(bot_api: FakeBotApi, no_telegram_user: Any) -> None:
    _client, ref = login(no_telegram_user)
    with pytest.raises(errors.TelegramNotOffered):
        link_token(ref, impersonated=False)


def test_a_user_who_lost_the_permission_before_start_links_nothing(
    bot_api: FakeBotApi, ref: SessionRef, user: Any
) -> None:
    token = link_token(ref, impersonated=False)
    user.user_permissions.remove(*user.user_permissions.filter(codename="use_telegram"))
    handled(bot_api.says(CHAT, f"/start {token}"))
    assert not TelegramLink.objects.exists()
    assert TelegramLinkToken.objects.get().used_at is None
    assert "may not use the assistant" in bot_api.texts(CHAT)[-1]


def test_no_token_while_telegram_is_off(ref: SessionRef, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "TELEGRAM": None}
    with pytest.raises(errors.TelegramNotOffered):
        link_token(ref, impersonated=False)


def test_an_impersonating_operator_gets_no_token(bot_api: FakeBotApi, ref: SessionRef) -> None:
    with pytest.raises(errors.Impersonated):
        link_token(ref, impersonated=True)


def test_stop_in_telegram_revokes_and_the_chat_is_then_a_stranger(bot_api: FakeBotApi, ref: SessionRef) -> None:
    link = connect(bot_api, ref, CHAT)
    handled(bot_api.says(CHAT, "/stop"))
    assert TelegramLink.objects.get(pk=link.pk).revoked_at is not None
    with pytest.raises(errors.SessionGone):
        authorize_session(TelegramRef(link.pk, link.user_id), impersonated=False)
    handled(bot_api.says(CHAT, "hello"))
    assert "not connected" in bot_api.texts(CHAT)[-1]


def test_the_page_revokes_only_its_users_links(bot_api: FakeBotApi, ref: SessionRef, make_user: Any) -> None:
    link = connect(bot_api, ref, CHAT)
    _client, other = login(make_user("agent.use_telegram"))
    assert revoke(other, link.pk, impersonated=False) is False
    assert revoke(ref, "not a number", impersonated=False) is False
    assert TelegramLink.objects.get(pk=link.pk).revoked_at is None
    assert revoke(ref, link.pk, impersonated=False) is True
    assert live_links(ref, impersonated=False) == []


def test_a_chat_linked_again_after_stop_is_a_new_link(bot_api: FakeBotApi, ref: SessionRef) -> None:
    first = connect(bot_api, ref, CHAT)
    handled(bot_api.says(CHAT, "/stop"))
    second = connect(bot_api, ref, CHAT)
    assert second.pk != first.pk and TelegramLink.objects.filter(revoked_at=None).count() == 1


def test_refusals_speak_the_telegram_users_language(bot_api: FakeBotApi, ref: SessionRef) -> None:
    sentence = "This chat is not connected yet. On the site, open the assistant and choose Connect Telegram."
    with translation.override("ru"):
        russian = gettext(sentence)
    assert russian != sentence
    handled(bot_api.says(CHAT, "hello", language="ru"))
    handled(bot_api.says(CHAT + 1, "hello", language="fr"))  # not offered: the site's language
    assert bot_api.texts(CHAT) == [russian] and bot_api.texts(CHAT + 1) == [sentence]


def test_a_link_for_a_deactivated_user_is_refused_and_stays_refused(
    bot_api: FakeBotApi, ref: SessionRef, user: Any
) -> None:
    link = connect(bot_api, ref, CHAT)
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(errors.Inactive):
        authorize_session(TelegramRef(link.pk, user.pk), impersonated=False)
    with pytest.raises(errors.Impersonated):
        authorize_session(TelegramRef(link.pk, user.pk), impersonated=True)


def test_link_token_guesses_are_rate_limited_per_chat(bot_api: FakeBotApi, ref: SessionRef, settings: Any) -> None:
    # given a chat that guessed TELEGRAM_LINK_TRIES_PER_MINUTE tokens this minute
    settings.AGENT = {**settings.AGENT, "TELEGRAM_LINK_TRIES_PER_MINUTE": 3}
    for guess in range(3):
        handled(bot_api.says(CHAT, f"/start guess{guess}AAAAAAAAAAAAAAAAAAAAAAAAAA"))
    # when it sends a real token next
    handled(bot_api.says(CHAT, f"/start {link_token(ref, impersonated=False)}"))
    # then nothing is linked, it is told to wait, and another chat is not held back
    assert not TelegramLink.objects.exists()
    assert "Too many tries" in bot_api.texts(CHAT)[-1]
    connect(bot_api, ref, CHAT + 1)
