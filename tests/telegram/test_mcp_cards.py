"""A card an MCP client's write made is shown in the user's linked Telegram chats, with Confirm / Cancel
that decide it as on the page; a revoked link is shown nothing."""

from __future__ import annotations

from typing import Any

import pytest

from agent import confirmations
from agent.access import McpRef, SessionRef, authorize_session
from agent.mcp import calls, issue_token, tokens
from agent.models import Confirmation
from agent.telegram import revoke, updates
from tests.notes.models import Note
from tests.support.factories import UserSettingsFactory
from tests.support.sessions import grant
from tests.support.telegram import connect
from tests.support.telegram_api import FakeBotApi
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
CHAT = 7301


def mcp_write(user: Any, title: str) -> Confirmation:
    """An MCP client's write of a note, as the endpoint makes it for the token's scope."""
    grant(user, "agent.use_mcp")
    secret = issue_token(user, f"Claude {title}")
    scope = authorize_session(McpRef(tokens.digest(secret)), impersonated=False)
    made = calls.call(scope, "notes_create", {"title": title}, client="Claude", site="http://testserver")
    assert made.confirmation is not None and made.confirmation.status == "waiting"
    return made.confirmation


def test_an_mcp_card_is_shown_in_telegram_and_confirmed_there_once(
    worker: Any, bot_api: FakeBotApi, ref: SessionRef, user: Any
) -> None:
    connect(bot_api, ref, CHAT)
    confirmation = mcp_write(user, "From Claude")

    shown = wait_until(lambda: next((m for m in bot_api.chat(CHAT) if m.buttons), None), 15, "the card in Telegram")
    assert "Create a note" in shown.text and "From Claude" in shown.text
    confirm = bot_api.button(shown, "Confirm")
    updates.record(bot_api.presses(CHAT, shown.message_id, confirm))
    updates.record(bot_api.presses(CHAT, shown.message_id, confirm))

    wait_until(lambda: len(bot_api.answers) == 2, what="both presses answered")
    assert Note.objects.filter(title="From Claude").count() == 1
    assert Confirmation.objects.get(pk=confirmation.pk).status == "done"
    wait_until(lambda: not bot_api.messages[(CHAT, shown.message_id)].buttons, what="the card's buttons gone")


def test_a_revoked_link_is_shown_no_mcp_card(worker: Any, bot_api: FakeBotApi, ref: SessionRef, user: Any) -> None:
    gone = connect(bot_api, ref, CHAT)
    connect(bot_api, ref, CHAT + 1)
    revoke(ref, gone.pk, impersonated=False)
    before = len(bot_api.chat(CHAT))

    mcp_write(user, "Only in the live chat")

    wait_until(lambda: any(m.buttons for m in bot_api.chat(CHAT + 1)), 15, "the card in the live chat")
    assert len(bot_api.chat(CHAT)) == before


def test_an_mcp_card_decided_on_the_page_is_edited_in_telegram_in_the_users_language(
    worker: Any, bot_api: FakeBotApi, ref: SessionRef, user: Any
) -> None:
    UserSettingsFactory(user=user, language="ru")
    connect(bot_api, ref, CHAT)
    confirmation = mcp_write(user, "Milk")
    shown = wait_until(lambda: next((m for m in bot_api.chat(CHAT) if m.buttons), None), 15, "the card in Telegram")

    confirmations.confirm(ref, confirmation.pk, impersonated=False)

    wait_until(lambda: not bot_api.messages[(CHAT, shown.message_id)].buttons, what="the card's buttons gone")
    assert "Выполнено" in bot_api.messages[(CHAT, shown.message_id)].text
