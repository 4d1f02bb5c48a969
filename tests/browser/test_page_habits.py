"""The page's habits: nothing goes before its files, a long paste says how much is read, a jump to the latest,
a site's starter suggestions, dark colours, and no empty chat left behind.

This module's site sets its own reading limit and suggestions, so the page is seen to take both from the
server. Where the transport matters, each test runs over the websocket and over the event stream (websockets
blocked by the browser's routing, as a proxy that refuses the upgrade would).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent.conversations import append_message
from agent.models import Conversation, Message, Turn
from tests.support.browser import paste, send, sign_in
from tests.support.factories import ConversationFactory
from tests.support.model_server import answer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READ_CHARS = 40_000
SUGGESTIONS = ["Which notes did I change today?", "Tidy up my shopping list"]
SITE_AGENT_SETTINGS = {"ATTACHMENT_TEXT_CHARS": READ_CHARS, "STARTER_SUGGESTIONS": SUGGESTIONS}


@pytest.fixture(params=["websocket", "event stream"])
def transport(request: Any, browser_context: Any) -> str:
    """The page's live transport: the websocket, or the event stream with every websocket refused."""
    if request.param == "event stream":
        browser_context.route_web_socket(re.compile(r"/ws/agent/"), lambda ws: ws.close())
    return request.param


def attach(tab: Page, name: str, content: bytes) -> None:
    with tab.expect_file_chooser() as chooser:
        tab.locator("#attach").click()
    chooser.value.set_files(files=[{"name": name, "mimeType": "text/plain", "buffer": content}])


def test_enter_during_a_slow_upload_sends_nothing_and_says_why_then_sends_with_the_file(
    transport, tab, user, endpoint, model_server
):
    # given a file whose upload the network holds back
    model_server.push(answer("It lists milk."))
    held: list[Any] = []
    tab.route("**/attachments/upload/", lambda route: held.append(route))
    sign_in(tab, user)
    with tab.expect_request("**/attachments/upload/"):
        attach(tab, "list.txt", b"milk, bread")
    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip).to_have_attribute("data-status", "uploading")

    # when the user writes and presses Enter, as the Send button, disabled, would not let them
    tab.fill("#composer-text", "what is on my list?")
    expect(tab.locator("#send")).to_be_disabled()
    tab.press("#composer-text", "Enter")

    # then nothing goes out, the words stay, and the page says why
    tab.wait_for_timeout(500)
    assert not Turn.objects.exists()
    expect(tab.locator("#outbox")).to_be_hidden()
    expect(tab.locator("#composer-text")).to_have_value("what is on my list?")
    expect(tab.locator("#composer-note")).to_have_text(
        "Not sent yet: a file is still on its way. Send once every file is ready."
    )

    # when the upload gets through and the file is read, Enter sends the words with the file
    held[0].continue_()
    expect(chip).to_have_attribute("data-status", "ready")
    expect(tab.locator("#composer-note")).to_have_text("")
    expect(tab.locator("#send")).to_be_enabled()
    tab.press("#composer-text", "Enter")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("It lists milk.")
    sent = Message.objects.get(role=Message.Role.USER)
    assert [file.name for file in sent.attachments.all()] == ["list.txt"]


def test_a_long_paste_s_chip_says_how_much_of_it_the_assistant_reads(tab, user):
    sign_in(tab, user)

    paste(tab, "é" * 50_000)  # characters, not bytes: each is two bytes in the file

    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip.locator(".agent-file-name")).to_have_text("pasted.txt")
    expect(chip.locator(".agent-file-note")).to_have_text(
        "The assistant reads the first 40,000 of its 50,000 characters."
    )

    # a paste within the limit says nothing of the kind
    paste(tab, "x" * 35_000)
    expect(chip.nth(1).locator(".agent-file-name")).to_have_text("pasted-2.txt")
    expect(chip.nth(1).locator(".agent-file-note")).to_have_count(0)
    expect(chip.nth(1)).to_have_attribute("data-status", "ready")
    assert Conversation.objects.count() == 1  # the second paste went into the chat made for the first


def test_a_paste_in_a_new_chat_never_sent_leaves_no_chat_behind_and_keeps_the_words(tab, user):
    # given an older chat, and a new chat the page made for a long paste, with words typed under it
    older = ConversationFactory(user=user, title="Older")
    append_message(older.pk, role=Message.Role.USER, content="older words")
    sign_in(tab, user)
    paste(tab, "x" * 40_000)
    expect(tab.locator("#composer-files .agent-file-chip")).to_have_attribute("data-status", "ready")
    tab.locator("#composer-text").fill("about this paste")
    made = Conversation.objects.exclude(pk=older.pk).get()
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["New chat", "Older"])

    # when the user goes to another chat without sending
    tab.locator("#chat-list .chat-link", has_text="Older").click()

    # then the made chat is gone from the list and the server, and the words wait in the next new chat
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["Older"])
    wait_until(lambda: Conversation.objects.get(pk=made.pk).status == Conversation.Status.DELETED)
    tab.locator("#new-chat").click()
    expect(tab.locator("#composer-text")).to_have_value("about this paste")
    tab.reload()
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["Older"])


def test_a_chat_made_for_a_paste_and_then_used_stays(tab, user, endpoint, model_server):
    model_server.push(answer("Read it."))
    sign_in(tab, user)
    paste(tab, "x" * 40_000)
    expect(tab.locator("#composer-files .agent-file-chip")).to_have_attribute("data-status", "ready")
    send(tab, "read this")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Read it.")

    tab.locator("#new-chat").click()

    expect(tab.locator("#chat-list .chat-link")).to_have_text(["read this"])
    assert Conversation.objects.get().status == Conversation.Status.ACTIVE


def test_a_jump_to_the_latest_shows_when_scrolled_up_and_marks_what_arrived(transport, tab, user):
    # given a long chat, open at its end
    chat = ConversationFactory(user=user, title="Long")
    for number in range(40):
        append_message(chat.pk, role=Message.Role.USER, content=f"line {number}\n" * 3)
    sign_in(tab, user, f"/assistant/c/{chat.pk}/")
    expect(tab.locator(".msg-user").last).to_contain_text("line 39")
    jump = tab.locator("#jump-latest")
    expect(jump).to_be_hidden()

    # when the user scrolls up, the button shows; when a message arrives meanwhile, it is marked
    tab.locator("#messages").evaluate("box => { box.scrollTop = 0; }")
    expect(jump).to_be_visible()
    expect(jump).to_have_attribute("data-fresh", "false")
    append_message(chat.pk, role=Message.Role.USER, content="a new one")
    expect(tab.locator(".msg-user").last).to_contain_text("a new one")
    expect(jump).to_have_attribute("data-fresh", "true")
    expect(tab.get_by_role("button", name="Jump to the latest")).to_be_visible()

    # when it is pressed, the newest message is in view and the button goes
    jump.click()
    expect(tab.locator(".msg-user").last).to_be_in_viewport()
    expect(jump).to_be_hidden()


def test_the_site_s_starter_suggestions_fill_the_message_box(tab, user):
    sign_in(tab, user)

    suggestions = tab.locator("#empty-state .suggestion")
    expect(suggestions).to_have_text(SUGGESTIONS)
    suggestions.nth(1).click()

    expect(tab.locator("#composer-text")).to_have_value("Tidy up my shopping list")
    expect(tab.locator("#composer-text")).to_be_focused()
    expect(tab.locator("#send")).to_be_enabled()
    assert not Conversation.objects.exists()  # filled, not sent


def test_the_page_follows_the_system_s_dark_colours(tab, user):
    tab.emulate_media(color_scheme="dark")
    sign_in(tab, user)
    background = tab.evaluate("getComputedStyle(document.querySelector('.composer')).backgroundColor")
    text = tab.evaluate("getComputedStyle(document.body).color")
    assert background == "rgb(29, 33, 41)"  # the dark panel
    assert text == "rgb(230, 233, 239)"

    tab.emulate_media(color_scheme="light")
    background = tab.evaluate("getComputedStyle(document.querySelector('.composer')).backgroundColor")
    assert background == "rgb(255, 255, 255)"


def test_a_chat_left_while_the_read_of_its_title_was_on_its_way_gets_its_title_in_the_list(
    tab, user, endpoint, model_server
):
    # given a chat with no title yet, open, whose reads of its details the network holds from now on
    model_server.push(answer("Read it."))
    chat = ConversationFactory(user=user, title="")
    sign_in(tab, user, f"/assistant/c/{chat.pk}/")
    held: list[tuple[Any, Any]] = []
    holding = [True]

    def hold(route: Any) -> None:
        if holding[0]:
            held.append((route, route.fetch()))
        else:
            route.continue_()

    tab.route(re.compile(rf"/api/conversations/{chat.pk}/$"), hold)

    # when its first message gives it a title, and the user opens a new chat before the read of it comes back
    with tab.expect_request(re.compile(rf"/api/conversations/{chat.pk}/$")):
        send(tab, "read this")
        expect(tab.locator(".msg-assistant .bubble")).to_have_text("Read it.")
    for _wait in range(200):  # the route's handler runs while Playwright waits
        if held:
            break
        tab.wait_for_timeout(50)
    assert held, "the chat's read was held"
    tab.locator("#new-chat").click()
    expect(tab.locator("#chat-title")).to_have_text("New chat")
    holding[0] = False  # a later read goes through; those held come back now, in the order they left
    for route, response in held:
        route.fulfill(response=response)

    # then the list shows the title the read brought
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["read this"])


def test_a_read_of_the_chat_that_left_before_its_title_was_stored_does_not_undo_the_title(
    tab, user, endpoint, model_server
):
    # given a chat with no title yet, open, whose first read of its details the network holds back
    model_server.push(answer("Read it."))
    chat = ConversationFactory(user=user, title="")
    held: list[tuple[Any, Any]] = []

    def hold_the_first(route: Any) -> None:
        if held:
            route.continue_()
        else:
            held.append((route, route.fetch()))

    tab.route(re.compile(rf"/api/conversations/{chat.pk}/$"), hold_the_first)
    with tab.expect_request(re.compile(rf"/api/conversations/{chat.pk}/$")):
        sign_in(tab, user, f"/assistant/c/{chat.pk}/")

    # when its first message gives it a title, read by a later read, and then the first read comes in
    send(tab, "read this")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Read it.")
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["read this"])
    assert held, "the chat's first read was held"
    route, response = held[0]
    with tab.expect_event("requestfinished", lambda request: request.url == route.request.url):
        route.fulfill(response=response)
    tab.evaluate("() => new Promise((done) => setTimeout(done, 200))")  # the page handles the answer

    # then the chat keeps the title its later read brought
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["read this"])
    expect(tab.locator("#chat-title")).to_have_text("read this")
