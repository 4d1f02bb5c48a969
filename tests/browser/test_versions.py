"""Versions in the browser: edit an earlier message, switch with "< i/n >", regenerate, a second tab, Copy."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from agent.models import Message
from tests.support.browser import send, sign_in
from tests.support.model_server import answer, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_edit_switch_and_regenerate_follow_in_a_second_tab(browser_context, tab, user, endpoint, model_server):
    # given a chat of two questions answered, open in two tabs
    model_server.push(answer("Cats purr."), answer("Dogs bark."), answer("Kittens play."), answer("Kittens nap."))
    sign_in(tab, user)
    send(tab, "cats?")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Cats purr.")
    send(tab, "dogs?")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["Cats purr.", "Dogs bark."])
    other = browser_context.new_page()
    other.goto(tab.url)
    expect(other.locator(".msg-assistant .bubble")).to_have_text(["Cats purr.", "Dogs bark."])

    # when the earlier message is edited in place
    first = tab.locator(".msg-user").first
    first.locator(".msg-edit").click()
    first.locator(".msg-editor-text").fill("kittens?")
    first.locator(".msg-editor-save").click()

    # then both tabs show the new line only, with the version arrows under the edited message
    for page in (tab, other):
        expect(page.locator(".msg-user .bubble")).to_have_text(["kittens?"])
        expect(page.locator(".msg-assistant .bubble")).to_have_text(["Kittens play."])
        expect(page.locator(".msg-user .msg-versions-at")).to_have_text("2/2")
    assert Message.objects.filter(role="user").count() == 3  # nothing sent twice, nothing overwritten

    # when the first version is shown again, and then the second
    tab.locator(".msg-user .msg-version-back").click()
    for page in (tab, other):
        expect(page.locator(".msg-user .bubble")).to_have_text(["cats?", "dogs?"])
        expect(page.locator(".msg-assistant .bubble")).to_have_text(["Cats purr.", "Dogs bark."])
        expect(page.locator(".msg-user .msg-versions-at").first).to_have_text("1/2")
    tab.locator(".msg-user .msg-version-next").first.click()
    for page in (tab, other):
        expect(page.locator(".msg-user .bubble")).to_have_text(["kittens?"])

    # when the answer is regenerated
    tab.locator(".msg-assistant .msg-regenerate").click()

    # then the new answer takes its place, the old one is its version 1/2, and both tabs follow
    for page in (tab, other):
        expect(page.locator(".msg-assistant .bubble")).to_have_text(["Kittens nap."])
        expect(page.locator(".msg-assistant .msg-versions-at")).to_have_text("2/2")
        expect(page.locator(".msg-user .bubble")).to_have_text(["kittens?"])
    assert model_server.requests[-1]["messages"][-1] == {"role": "user", "content": "kittens?"}


def test_an_answer_stored_while_a_tab_rereads_its_line_is_not_wiped_by_the_older_read(
    browser_context, tab, user, endpoint, model_server
):
    # given a chat open in two tabs, the second one's reads of the line held back by the network
    model_server.push(answer("Cats purr."), answer("Kittens play.", delay=1))
    sign_in(tab, user)
    send(tab, "cats?")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Cats purr.")
    other = browser_context.new_page()
    other.goto(tab.url)
    expect(other.locator(".msg-assistant .bubble")).to_have_text("Cats purr.")
    held: list[tuple[Any, Any]] = []
    other.route(lambda url: "latest=1" in url, lambda route: held.append((route, route.fetch())))

    # when the message is edited in the first tab: the second tab reads its new line before the answer is
    # stored, and the answer's own frame reaches it before that read does
    first = tab.locator(".msg-user").first
    first.locator(".msg-edit").click()
    first.locator(".msg-editor-text").fill("kittens?")
    first.locator(".msg-editor-save").click()
    expect(other.locator(".msg-assistant .bubble", has_text="Kittens play.")).to_be_visible()
    assert held, "the second tab read its line"
    other.locator("#message-log > *").evaluate_all(
        "shown => shown.forEach((element) => element.classList.add('shown-before'))"
    )
    for route, response in held:
        route.fulfill(response=response)

    # then once the read is shown, the answer stored after it is still there
    expect(other.locator("#message-log .shown-before")).to_have_count(0)
    expect(other.locator(".msg-user .bubble")).to_have_text(["kittens?"])
    expect(other.locator(".msg-assistant .bubble")).to_have_text(["Kittens play."])


def test_copy_puts_the_whole_message_on_the_clipboard(browser_context, tab, user, endpoint, model_server):
    browser_context.grant_permissions(["clipboard-read", "clipboard-write"])
    model_server.push(answer("First line.\n\n**Second** line."))
    sign_in(tab, user)
    send(tab, "two lines please")
    expect(tab.locator(".msg-assistant .bubble")).to_contain_text("Second")

    tab.locator(".msg-assistant .msg-copy").click()
    expect(tab.locator(".msg-assistant .msg-copy")).to_have_text("Copied")
    assert tab.evaluate("navigator.clipboard.readText()") == "First line.\n\n**Second** line."
    tab.locator(".msg-user .msg-copy").click()
    assert tab.evaluate("navigator.clipboard.readText()") == "two lines please"


def test_an_answer_after_a_tool_call_answered_again_keeps_its_earlier_version_in_reach(
    tab, user, endpoint, model_server
):
    # given an answer the model gave after reading the notes
    model_server.push(
        tool_calls(("notes_search", {"query": "milk"})),
        answer("No note mentions milk."),
        tool_calls(("notes_search", {"query": "milk"})),
        answer("Still none about milk."),
    )
    sign_in(tab, user)
    send(tab, "any notes about milk?")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["No note mentions milk."])

    # when it is answered again, through the tool again
    tab.locator(".msg-assistant .msg-regenerate").click()

    # then the new answer shows, with the turn's "< 2/2 >", and the arrow brings the first answer back
    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["Still none about milk."])
    expect(tab.locator(".msg-versions-at")).to_have_text(["2/2"])
    tab.locator(".msg-version-back").click()
    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["No note mentions milk."])
    expect(tab.locator(".msg-versions-at")).to_have_text(["1/2"])
