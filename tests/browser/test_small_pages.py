"""A site's own page size reaches the page: with ``MESSAGES_PAGE`` below the old fixed 50, scrolling up
still loads every older message, a page at a time."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from agent.conversations import append_message
from agent.models import Message
from tests.support.browser import sign_in
from tests.support.factories import ConversationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


SITE_AGENT_SETTINGS = {"MESSAGES_PAGE": 7}  # the site the browser talks to (tests/browser/conftest.py)


def test_with_a_small_page_size_scrolling_up_loads_every_older_message(tab: Any, user: Any) -> None:
    chat = ConversationFactory(user=user, title="long")
    for n in range(20):
        append_message(chat.pk, role=Message.Role.USER, content=f"m{n:02}")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    messages = tab.locator(".msg-user .bubble")
    expect(messages).to_have_count(7)
    expect(messages.first).to_have_text("m13")
    for shown in (14, 20):
        tab.locator("#messages").evaluate("box => { box.scrollTop = 0; }")
        expect(messages).to_have_count(shown)
    expect(messages.first).to_have_text("m00")
    expect(messages.last).to_have_text("m19")
