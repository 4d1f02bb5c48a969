"""The chat page on a phone (390 × 844, touch): one row of top bar, room for the messages, no keyboard hints."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from agent.conversations import append_message
from agent.models import Message
from tests.support.browser import ARTIFACTS, sign_in
from tests.support.factories import ConversationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def phone(chromium: Any, asgi_server: Any, worker: Any) -> Iterator[Any]:
    """A tab of a touch phone; any CSP violation or uncaught script error fails the test."""
    context = chromium.new_context(
        base_url=asgi_server.url, locale="en-US", viewport=PHONE, has_touch=True, is_mobile=True
    )
    context.set_default_timeout(10_000)
    broken: list[str] = []
    context.on("weberror", lambda error: broken.append(f"uncaught: {error.error}"))
    context.on("console", lambda message: "Content Security Policy" in message.text and broken.append(message.text))
    yield context.new_page()
    context.close()
    assert broken == [], "the page broke its policy or threw"


LONG_TITLE = "A very long chat title about the quarterly planning of the garden shed and its many tools, again"


def test_on_a_phone_the_top_bar_is_one_row_and_the_messages_get_the_room(phone, user):
    chat = ConversationFactory(user=user, title=LONG_TITLE)
    append_message(chat.pk, role=Message.Role.USER, content="hello")
    sign_in(phone, user, path=f"/assistant/c/{chat.pk}/")
    expect(phone.locator(".msg-user .bubble")).to_have_text("hello")
    expect(phone.locator("#chat-title")).to_have_text(LONG_TITLE)
    ARTIFACTS.mkdir(exist_ok=True)
    phone.screenshot(path=str(ARTIFACTS / "phone-chat.png"))

    sizes = phone.evaluate(
        """() => {
            const box = (id) => document.querySelector(id).getBoundingClientRect();
            return {
                page: document.documentElement.scrollWidth,
                topbar: box(".topbar").height,
                title: box("#chat-title").height,
                messages: box("#messages").height,
                toggle: box("#toggle-menu").top,
                brand: box(".brand").top,
            };
        }"""
    )
    assert sizes["page"] <= PHONE["width"], "nothing is wider than the screen"
    assert sizes["topbar"] < 56, "one row"
    assert abs(sizes["toggle"] - sizes["brand"]) < 20, "the menu button sits on the brand's row"
    assert sizes["title"] < 40, "a long title takes one line"
    assert sizes["messages"] > 0.55 * PHONE["height"], sizes

    # the settings and links are in the menu
    expect(phone.locator("#topbar-menu")).to_be_hidden()
    phone.locator("#toggle-menu").tap()
    expect(phone.locator("#topbar-menu a", has_text="My assistant")).to_be_visible()
    expect(phone.locator("#toggle-menu")).to_have_attribute("aria-expanded", "true")
    expect(phone.locator("#show-shortcuts")).to_be_hidden()  # no keyboard, no shortcuts
    phone.locator("#messages").tap()
    expect(phone.locator("#topbar-menu")).to_be_hidden()


def test_on_a_touch_keyboard_enter_starts_a_new_line_and_send_sends(phone, user, endpoint, model_server):
    from tests.support.model_server import answer

    model_server.push(answer("Two lines."))
    sign_in(phone, user)
    box = phone.locator("#composer-text")
    expect(box).to_have_attribute("placeholder", "Write a message.")
    box.fill("one")
    box.press("Enter")
    box.type("two")
    expect(box).to_have_value("one\ntwo")
    assert not Message.objects.exists()
    phone.locator("#send").tap()
    expect(phone.locator(".msg-user .bubble")).to_have_text("one\ntwo")
    expect(phone.locator(".msg-assistant .bubble")).to_have_text("Two lines.")


def test_in_russian_the_composer_buttons_fit_the_phone_on_one_line_each_while_a_turn_runs(
    chromium, asgi_server, worker, user, endpoint, model_server
):
    from tests.support.model_server import answer

    model_server.push(answer("Долгий ответ " + " ".join(["слово"] * 30), chunk_delay=0.15))
    context = chromium.new_context(
        base_url=asgi_server.url, locale="ru-RU", viewport=PHONE, has_touch=True, is_mobile=True
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    try:
        sign_in(page, user)
        page.locator("#composer-text").fill("привет")
        page.locator("#send").tap()
        expect(page.locator("#stop")).to_be_visible()
        expect(page.locator("#attach")).to_have_text("Прикрепить файлы")
        boxes = {name: page.locator(f"#{name}").bounding_box() for name in ("attach", "send", "stop")}
        for name, box in boxes.items():
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], name  # none pushed off the screen
            assert box["height"] <= boxes["send"]["height"] + 1, name  # and none wrapped onto two lines
        page.screenshot(path=ARTIFACTS / "phone-composer-ru.png")
    finally:
        context.close()
