"""Cards a person understands, in the browser: the tool's title, labelled fields, the state in the header."""

from __future__ import annotations

import pytest
from django.utils import translation
from playwright.sync_api import expect

from tests.notes.models import Note
from tests.support.browser import send, sign_in
from tests.support.factories import UserSettingsFactory
from tests.support.model_server import answer, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_card_in_russian_shows_its_title_and_labels_hides_empty_fields_and_its_state_in_every_tab(
    browser_context, tab, user, endpoint, model_server
):
    # given a Russian-speaking user with the chat open in two tabs
    UserSettingsFactory(user=user, language="ru")
    model_server.push(answer("Привет."), tool_calls(("notes_create", {"title": "Купить молоко", "body": ""})))
    sign_in(tab, user)
    send(tab, "привет")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Привет.")
    other = browser_context.new_page()
    other.goto(tab.url)
    expect(other.locator("#connection")).to_be_hidden()
    with translation.override("ru"):
        title, label = translation.gettext("Create a note"), translation.gettext("Title")
    assert label == "Название"

    # when the model proposes a note with an empty text
    send(tab, "запиши: купить молоко")
    for page in (tab, other):
        card = page.locator(".card")
        expect(card.locator(".card-title")).to_have_text(title)
        expect(card.locator(".card-preview dt")).to_have_text([label])  # the empty text is not shown
        expect(card.locator(".card-preview dd")).to_have_text(["Купить молоко"])
        expect(card).to_have_attribute("data-status", "waiting")
    waiting_state = tab.locator(".card .card-state").inner_text()

    # then the other tab's decision shows in this tab's header and its outcome without another model turn
    other.locator(".card .card-confirm").click()
    for page in (tab, other):
        expect(page.locator(".card")).to_have_attribute("data-status", "done")
        expect(page.locator(".card .card-state")).not_to_have_text(waiting_state)
        notice = page.locator('[data-notice-code="confirmation_done"]')
        expect(notice).to_contain_text(title)
        expect(notice).to_have_attribute("data-tone", "success")
    assert Note.objects.filter(owner=user, title="Купить молоко").exists()
    assert len(model_server.requests) == 2  # no model call was needed to show what happened
