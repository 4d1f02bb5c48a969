"""Reading the chat in the browser: tables, highlighted code with a copy button, times, steps, notices."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import send, sign_in
from tests.support.model_server import answer, error, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TABLE_AND_CODE = "Here:\n\n| Note | Count |\n|---|--:|\n| milk | 2 |\n| bread | 1 |\n\n```python\nprint('hello')\n```\n"


def test_a_table_and_a_code_block_with_copy(browser_context, tab, user, endpoint, model_server):
    browser_context.grant_permissions(["clipboard-read", "clipboard-write"])
    model_server.push(answer(TABLE_AND_CODE))
    sign_in(tab, user)
    send(tab, "show me")

    body = tab.locator(".msg-assistant .bubble")
    expect(body.locator("table th")).to_have_text(["Note", "Count"])
    expect(body.locator("table td.align-right")).to_have_text(["2", "1"])
    code = body.locator(".code-box pre.code-block")
    expect(code.locator(".hl-nb")).to_have_text("print")
    assert code.evaluate("pre => getComputedStyle(pre.querySelector('.hl-s1')).color") != code.evaluate(
        "pre => getComputedStyle(pre).color"
    )  # the classes are styled: highlighting shows

    body.locator(".code-copy").click()
    expect(body.locator(".code-copy")).to_have_text("Copied")
    assert tab.evaluate("navigator.clipboard.readText()") == "print('hello')\n"


def test_each_message_shows_when_it_was_written_with_the_full_date_on_hover(tab, user, endpoint, model_server):
    model_server.push(answer("Hi."))
    sign_in(tab, user)
    send(tab, "hello")

    time = tab.locator(".msg-user .msg-time")
    expect(time).to_have_text("now")
    assert time.get_attribute("datetime")
    assert time.get_attribute("title")  # the full date, for hover
    expect(tab.locator(".msg-assistant .msg-time")).to_have_text("now")


def test_a_malformed_call_reads_as_the_assistant_correcting_itself_not_a_failed_search(
    tab, user, endpoint, model_server
):
    model_server.push(tool_calls(("notes_search", {"query": 5})), answer("I found no notes."))
    sign_in(tab, user)
    send(tab, "find my notes")

    expect(tab.locator(".msg-assistant .bubble")).to_have_text("I found no notes.")
    step = tab.locator(".msg-tool")
    expect(step).to_have_text("Search notes: the assistant corrects its request")
    expect(step).not_to_contain_text("item")


def test_success_and_error_notices_look_different(tab, user, endpoint, model_server):
    model_server.push(error(401), tool_calls(("notes_create", {"title": "Milk"})))
    sign_in(tab, user)
    send(tab, "hello")
    failed = tab.locator('[data-notice-code="model_failed"]')
    expect(failed).to_have_attribute("data-tone", "error")
    expect(tab.locator("#composer-text")).to_be_enabled()
    send(tab, "note milk")
    tab.locator(".card .card-confirm").click()
    done = tab.locator('[data-notice-code="confirmation_done"]')
    expect(done).to_have_attribute("data-tone", "success")
    colours = [n.evaluate("n => getComputedStyle(n).backgroundColor") for n in (failed, done)]
    assert colours[0] != colours[1]


def test_regenerate_after_a_failed_call_answers_the_same_message_again(tab, user, endpoint, model_server):
    model_server.push(error(500), answer("Here it is."))
    sign_in(tab, user)
    send(tab, "what is new?")
    failed = tab.locator('[data-notice-code="model_failed"]')
    expect(failed.locator(".msg-regenerate")).to_be_visible()

    failed.locator(".msg-regenerate").click()

    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Here it is.")
    expect(tab.locator(".msg-user .bubble")).to_have_text(["what is new?"])  # not sent a second time
    expect(tab.locator('[data-notice-code="model_failed"]')).to_have_count(0)  # an earlier version now
    assert model_server.requests[-1]["messages"][-1]["content"] == "what is new?"


def test_a_message_edited_in_place_becomes_a_new_version_of_it(tab, user, endpoint, model_server):
    model_server.push(answer("About cats."), answer("About dogs."))
    sign_in(tab, user)
    send(tab, "tell me about cats")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("About cats.")

    tab.locator(".msg-user .msg-edit").click()
    editor = tab.locator(".msg-user .msg-editor-text")
    expect(editor).to_have_value("tell me about cats")
    expect(editor).to_be_focused()
    editor.fill("tell me about dogs")
    tab.locator(".msg-user .msg-editor-save").click()

    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["About dogs."])
    expect(tab.locator(".msg-user .bubble")).to_have_text(["tell me about dogs"])
    expect(tab.locator(".msg-user .msg-versions-at")).to_have_text("2/2")
