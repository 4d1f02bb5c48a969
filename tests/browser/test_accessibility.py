"""The chat page passes axe-core with no serious or critical violations, and its keyboard shortcuts work.

axe-core is vendored (tests/browser/vendor, MPL-2.0) and evaluated through the DevTools protocol,
which the page's strict CSP does not apply to, so the page under test keeps its policy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent.conversations import append_message
from agent.models import Message
from tests.support.browser import send, sign_in
from tests.support.factories import ConversationFactory
from tests.support.model_server import answer, error, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text()


def serious_violations(tab: Page) -> list[dict[str, Any]]:
    if not tab.evaluate("typeof window.axe === 'object'"):
        tab.evaluate(AXE)
    found = tab.evaluate("""async () => {
        const result = await axe.run(document, {resultTypes: ['violations']});
        return result.violations.map(v => ({id: v.id, impact: v.impact,
                                            nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}));
    }""")
    return [v for v in found if v["impact"] in ("serious", "critical")]


def test_the_chat_page_has_no_serious_accessibility_violations(tab, user, endpoint, model_server):
    # given a chat with an answer (a table, code), a failed call with Regenerate, a card, and a step
    model_server.push(
        answer("| a | b |\n|---|--:|\n| 1 | 2 |\n\n```python\nprint('x')\n```"),
        error(500),
        tool_calls(("notes_search", {"query": "milk"})),
        tool_calls(("notes_create", {"title": "Milk"})),
    )
    sign_in(tab, user)
    assert serious_violations(tab) == []  # the empty page
    send(tab, "show me a table")
    expect(tab.locator(".code-copy")).to_be_visible()
    send(tab, "and again")
    expect(tab.locator(".msg-notice .msg-regenerate")).to_be_visible()
    send(tab, "note milk")
    expect(tab.locator(".card .card-confirm")).to_be_enabled()

    assert serious_violations(tab) == []

    # and its dialogs and other lists
    tab.locator("#show-shortcuts").click()
    expect(tab.locator("#shortcuts-dialog")).to_be_visible()
    assert serious_violations(tab) == []
    tab.keyboard.press("Escape")
    tab.locator("#show-archived").click()
    expect(tab.locator("#chat-list-status")).to_have_text("No archived chats.")
    assert serious_violations(tab) == []


def test_an_answer_streaming_in_has_no_serious_accessibility_violations(tab, user, endpoint, model_server):
    model_server.push(answer(" ".join(f"word{n}" for n in range(30)), chunk_delay=0.15))
    sign_in(tab, user)
    send(tab, "write slowly")
    expect(tab.locator("#draft .msg-draft .bubble")).to_contain_text("word1")
    assert serious_violations(tab) == []


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
