"""Cards the user edits before confirming, in the browser: the old value beside the new, a refused
edit's message beside its field, and the edit that ran shown in every tab."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from tests.notes.models import Note
from tests.support.browser import ARTIFACTS, send, sign_in
from tests.support.model_server import answer, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NARROW_PHONE = {"width": 360, "height": 800}
"""Narrower than tests/browser/test_phone.py's phone: the smallest screen the card's form must fit."""


def propose_retitle(model_server: Any, note: Note, title: str) -> None:
    model_server.push(tool_calls(("notes_retitle", {"note_id": note.pk, "title": title})))


def test_the_user_fixes_the_models_title_on_the_card_and_every_tab_shows_the_edit_that_ran(
    browser_context, tab, user, endpoint, model_server
):
    # given a note with a typo and the chat open in two tabs, where the model proposes a title that keeps it
    # (an all-capitals one it could not: the tool's validation refuses the model's arguments too)
    note = Note.objects.create(owner=user, title="Buy mlik")
    model_server.push(answer("Hi."))
    propose_retitle(model_server, note, "Buy mlik!")
    sign_in(tab, user)
    console_errors: list[str] = []
    tab.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
    send(tab, "hi")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Hi.")
    other = browser_context.new_page()
    other.goto(tab.url)
    expect(other.locator("#connection")).to_be_hidden()
    send(tab, "fix the typo in my note")

    # then both tabs show the current title struck through, and the new one in a labelled field
    for page in (tab, other):
        card = page.locator(".card")
        expect(card).to_have_attribute("data-status", "waiting")
        expect(card.locator(".card-preview del")).to_have_text("Buy mlik")
        expect(card.get_by_label("Title")).to_have_value("Buy mlik!")
        expect(card.locator(".card-preview dd").first).to_have_text(str(note.pk))  # not editable: text

    # when the user changes it to an all-capitals title and confirms
    card = tab.locator(".card")
    title = card.get_by_label("Title")
    title.fill("BUY MILK")
    card.locator(".card-confirm").click()

    # then the refusal shows beside the field, and the card waits for a better one
    message = card.locator(".card-field-error")
    expect(message).to_have_text("A title may not be all capitals.")
    expect(title).to_have_attribute("aria-invalid", "true")
    expect(title).to_have_attribute("aria-describedby", message.get_attribute("id"))
    expect(card).to_have_attribute("data-status", "waiting")
    expect(title).to_have_value("BUY MILK")  # what the user typed stays to be fixed
    assert Note.objects.get(pk=note.pk).title == "Buy mlik"
    assert console_errors == []  # a refusal the user is expected to fix is no failure of the page

    # when the user fixes it and confirms with Enter, the form's submit
    title.fill("Buy milk")
    title.press("Enter")

    # then both tabs show the card done, with text in place of the field and the mark of an edit
    for page in (tab, other):
        card = page.locator(".card")
        expect(card).to_have_attribute("data-status", "done")
        expect(card.locator(".card-input")).to_have_count(0)
        expect(card.locator(".card-edited")).to_be_visible()
        expect(page.locator('[data-notice-code="confirmation_done"]')).to_contain_text("with your changes")
        # the value that ran, in the tab that confirmed and in the other one without a reload
        expect(page.locator(".card .card-preview dd").nth(1)).to_have_text(
            "Current value: Buy mlik → New value: Buy milk"
        )
    assert Note.objects.get(pk=note.pk).title == "Buy milk"

    # and a reload shows the values that ran, still marked as edited
    other.reload()
    expect(other.locator(".card .card-edited")).to_be_visible()
    expect(other.locator(".card .card-value").nth(1)).to_have_text("New value: Buy milk")


@pytest.fixture
def narrow_phone(chromium: Any, asgi_server: Any, worker: Any) -> Iterator[Any]:
    """A tab of a narrow touch phone; any CSP violation or uncaught script error fails the test."""
    context = chromium.new_context(
        base_url=asgi_server.url, locale="en-US", viewport=NARROW_PHONE, has_touch=True, is_mobile=True
    )
    context.set_default_timeout(10_000)
    broken: list[str] = []
    context.on("weberror", lambda error: broken.append(f"uncaught: {error.error}"))
    context.on("console", lambda message: "Content Security Policy" in message.text and broken.append(message.text))
    yield context.new_page()
    context.close()
    assert broken == [], "the page broke its policy or threw"


def test_on_a_narrow_phone_the_cards_form_fits_the_screen(narrow_phone, user, endpoint, model_server):
    note = Note.objects.create(owner=user, title="A rather long title for a note about the garden shed")
    propose_retitle(model_server, note, "An even longer title for the note about the garden shed and its tools")
    sign_in(narrow_phone, user)
    narrow_phone.fill("#composer-text", "rename my note")
    narrow_phone.locator("#send").tap()
    field = narrow_phone.locator(".card").get_by_label("Title")
    expect(field).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    narrow_phone.screenshot(path=str(ARTIFACTS / "phone-card-form.png"))

    sizes = narrow_phone.evaluate(
        """() => ({
            page: document.documentElement.scrollWidth,
            card: document.querySelector(".card").getBoundingClientRect().right,
            field: document.querySelector(".card .card-input").getBoundingClientRect().right,
            buttons: document.querySelector(".card .card-actions").getBoundingClientRect().right,
        })"""
    )
    assert sizes["page"] <= NARROW_PHONE["width"], "nothing is wider than the screen"
    assert sizes["field"] <= sizes["card"] and sizes["buttons"] <= sizes["card"], "the form stays inside its card"
