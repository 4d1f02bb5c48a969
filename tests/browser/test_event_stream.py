"""A network that blocks websockets: the page falls back to the event stream over HTTP, and returns when it can.

Every websocket the page opens is closed by the browser's own routing, as a
proxy that refuses the upgrade would; plain HTTP still works.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent.models import Message
from tests.notes.models import Note
from tests.support.browser import send, sign_in
from tests.support.model_server import answer, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORDS = " ".join(f"word{n:02}" for n in range(1, 16))
SLOW_ANSWER = "Over **HTTP** " + WORDS


class Network:
    """Websockets to the site blocked until ``unblock()``; what went over each transport, counted."""

    def __init__(self, context: Any, page: Page) -> None:
        self.blocked = True
        self.refused = 0
        self.streams = 0
        self.socket_frames: list[str] = []
        context.route_web_socket(re.compile(r"/ws/agent/"), self._route)
        page.on("request", self._request)
        page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: self.socket_frames.append(payload)))

    def _route(self, ws: Any) -> None:
        if self.blocked:
            self.refused += 1
            ws.close()
        else:
            ws.connect_to_server()

    def _request(self, request: Any) -> None:
        if "/assistant/api/events/" in request.url:
            self.streams += 1

    def unblock(self) -> None:
        self.blocked = False


RETRY_SOCKET_MS = 30_000
"""How often the page tries the websocket again while it is on the event stream (chat/socket.js)."""


def shown_once(page: Page, text: str) -> None:
    assert (page.locator("#message-log").text_content() or "").count(text) == 1


def test_with_websockets_blocked_the_answer_streams_in_and_a_card_is_confirmed(
    browser_context, tab, user, endpoint, model_server
):
    # given: no websocket gets through
    network = Network(browser_context, tab)
    model_server.push(answer(SLOW_ANSWER, chunk_delay=0.15), tool_calls(("notes_create", {"title": "Milk"})))
    sign_in(tab, user)

    # when: a message is sent, its answer streams in over HTTP
    send(tab, "write slowly")
    draft = tab.locator("#draft .msg-draft .bubble")
    expect(draft).to_have_text(re.compile(r"^Over HTTP word01"))
    expect(draft.locator("strong")).to_have_text("HTTP")  # formatted as it grows, as over the websocket
    answers = tab.locator("#message-log .msg-assistant .bubble.markdown")
    expect(answers).to_have_text("Over HTTP " + WORDS)
    expect(tab.locator("#working")).to_be_hidden()
    expect(tab.locator("#composer-text")).to_be_enabled()

    # and: a write becomes a card, which is confirmed and shows its outcome
    send(tab, "note: milk")
    card = tab.locator(".card")
    expect(card).to_have_attribute("data-status", "waiting")
    card.locator(".card-confirm").click()
    expect(card).to_have_attribute("data-status", "done")
    expect(tab.locator('[data-notice-code="confirmation_done"]')).to_have_count(1)
    assert Note.objects.filter(owner=user, title="Milk").exists()

    # then: everything came over the event stream, each message once
    assert network.refused >= 2 and network.streams >= 1 and network.socket_frames == []
    expect(tab.locator(".msg-user .bubble")).to_have_text(["write slowly", "note: milk"])
    expect(answers).to_have_count(1)
    shown_once(tab, "word15")
    expect(tab.locator("#connection")).to_be_hidden()


def test_the_page_returns_to_the_websocket_when_it_gets_through_again(
    browser_context, tab, user, endpoint, model_server
):
    # given: the page is on the event stream, with a chat answered over it
    network = Network(browser_context, tab)
    tab.clock.install()  # the page's timers, run on at will below
    model_server.push(answer("First, over HTTP."), answer("Second, over the websocket."))
    sign_in(tab, user)
    send(tab, "first")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["First, over HTTP."])
    expect(tab.locator("#composer-text")).to_be_enabled()
    assert network.streams >= 1

    # when: websockets get through again, and the page's next try in the background comes (within
    # half a minute: the page's clock is moved on by that much)
    network.unblock()
    tab.clock.fast_forward(RETRY_SOCKET_MS)
    for _ in range(100):
        if any('"type": "subscribed"' in frame for frame in network.socket_frames):
            break
        tab.wait_for_timeout(100)
    assert any('"type": "subscribed"' in frame for frame in network.socket_frames)
    streams_then = network.streams

    # then: the next answer comes over the websocket, and nothing is shown twice
    send(tab, "second")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["First, over HTTP.", "Second, over the websocket."])
    assert any("Second, over the websocket." in frame for frame in network.socket_frames)
    assert network.streams == streams_then
    expect(tab.locator(".msg-user .bubble")).to_have_text(["first", "second"])
    shown_once(tab, "First, over HTTP.")
    assert Message.objects.filter(role="assistant").count() == 2


def test_a_websocket_that_opens_but_never_says_ready_counts_as_blocked_after_five_seconds(
    browser_context, tab, user, endpoint, model_server
):
    # given: a proxy that takes the upgrade and then passes nothing on
    held: list[Any] = []
    browser_context.route_web_socket(re.compile(r"/ws/agent/"), lambda ws: held.append(ws))
    model_server.push(answer("Answered all the same."))
    sign_in(tab, user)

    # when
    send(tab, "hello")

    # then: the page stops waiting for the socket and reads the answer from the event stream
    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["Answered all the same."], timeout=20_000)
    assert len(held) == 1  # one try, given up on, not retried at once
