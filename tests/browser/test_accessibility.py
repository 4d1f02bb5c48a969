"""The chat page passes axe-core with no violations, light and dark, and its keyboard shortcuts work.

axe-core comes from npm, pinned in tests/browser/package.json (the ``axe_source`` fixture), and is
evaluated through the DevTools protocol, which the page's strict CSP does not apply to, so the page
under test keeps its policy. Besides axe's default rules it runs the one that checks a control's
accessible name holds its visible words (what a voice user says to press it).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent.conversations import append_message
from agent.models import Message
from tests.support.browser import send, sign_in
from tests.support.factories import ConversationFactory
from tests.support.model_server import answer, error, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def violations(tab: Page, axe_source: str) -> list[dict[str, Any]]:
    """Every axe violation on the page as it is now, whatever its impact."""
    if not tab.evaluate("typeof window.axe === 'object'"):
        tab.evaluate(axe_source)
    return tab.evaluate("""async () => {
        const result = await axe.run(document, {
            resultTypes: ['violations'], rules: {'label-content-name-mismatch': {enabled: true}},
        });
        return result.violations.map(v => ({id: v.id, impact: v.impact,
                                            nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}));
    }""")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_chat_page_has_no_accessibility_violations(scheme, tab, user, endpoint, model_server, axe_source):
    # given a chat with an answer (a table, code), a failed call with Regenerate, a card, and a step, in the
    # system's light or dark colours
    tab.emulate_media(color_scheme=scheme)
    model_server.push(
        answer("| a | b |\n|---|--:|\n| 1 | 2 |\n\n```python\nprint('x')\n```"),
        error(500),
        tool_calls(("notes_search", {"query": "milk"})),
        tool_calls(("notes_create", {"title": "Milk"})),
    )
    sign_in(tab, user)
    assert violations(tab, axe_source) == []  # the empty page
    send(tab, "show me a table")
    expect(tab.locator(".code-copy")).to_be_visible()
    send(tab, "and again")
    expect(tab.locator(".msg-notice .msg-regenerate")).to_be_visible()
    send(tab, "note milk")
    expect(tab.locator(".card .card-confirm")).to_be_enabled()

    assert violations(tab, axe_source) == []

    # and its dialogs and other lists
    tab.locator("#show-shortcuts").click()
    expect(tab.locator("#shortcuts-dialog")).to_be_visible()
    assert violations(tab, axe_source) == []
    tab.keyboard.press("Escape")
    tab.locator("#show-archived").click()
    expect(tab.locator("#chat-list-status")).to_have_text("No archived chats.")
    assert violations(tab, axe_source) == []


def test_an_answer_streaming_in_has_no_accessibility_violations(tab, user, endpoint, model_server, axe_source):
    model_server.push(answer(" ".join(f"word{n}" for n in range(30)), chunk_delay=0.15))
    sign_in(tab, user)
    send(tab, "write slowly")
    expect(tab.locator("#draft .msg-draft .bubble")).to_contain_text("word1")
    assert violations(tab, axe_source) == []


def test_keyboard_shortcuts_new_chat_focus_jump_and_help(tab, user):
    for title in ("Older", "Newer"):
        chat = ConversationFactory(user=user, title=title)
        append_message(chat.pk, role=Message.Role.USER, content=f"{title} words")
    sign_in(tab, user)
    links = tab.locator("#chat-list .chat-link")
    expect(links).to_have_text(["Newer", "Older"])

    # opening a chat leaves the list's order alone, so the jumps walk it
    tab.locator("body").press("Alt+ArrowDown")
    expect(tab.locator(".msg-user .bubble")).to_have_text(["Newer words"])
    tab.keyboard.press("Alt+ArrowDown")
    expect(tab.locator(".msg-user .bubble")).to_have_text(["Older words"])
    tab.keyboard.press("Alt+ArrowUp")
    expect(tab.locator(".msg-user .bubble")).to_have_text(["Newer words"])

    tab.keyboard.press("Alt+n")
    expect(tab).to_have_url(re.compile(r"/assistant/$"))
    expect(tab.locator("#chat-title")).to_have_text("New chat")

    tab.locator("#show-archived").focus()
    tab.keyboard.press("/")
    expect(tab.locator("#composer-text")).to_be_focused()
    tab.locator("#show-archived").focus()
    tab.keyboard.press("?")
    expect(tab.locator("#shortcuts-dialog")).to_be_visible()
    tab.keyboard.press("Escape")
    expect(tab.locator("#shortcuts-dialog")).to_be_hidden()


def test_escape_stops_a_running_turn(tab, user, endpoint, model_server):
    model_server.push(answer("too late", delay=3))
    sign_in(tab, user)
    send(tab, "take your time")
    expect(tab.locator("#stop")).to_be_visible()

    tab.keyboard.press("Escape")

    expect(tab.locator('[data-notice-code="stopped"]')).to_be_visible()
