"""The chat page end to end: the real ASGI app, a Celery worker, the scripted model, headless Chromium."""

from __future__ import annotations

import re

import pytest
from django.utils import translation
from playwright.sync_api import expect

from agent import notices
from agent.conversations import append_message
from agent.models import Message
from tests.notes.models import Note
from tests.support.browser import send, sign_in
from tests.support.factories import ConversationFactory, UserSettingsFactory
from tests.support.model_server import answer, error, tool_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_new_chat_gets_its_answer(tab, user, endpoint, model_server):
    model_server.push(answer("Hello **world**. <script>alert(1)</script>"))
    sign_in(tab, user)
    tab.fill("#composer-text", "line one")
    tab.press("#composer-text", "Shift+Enter")
    tab.type("#composer-text", "line two")
    tab.press("#composer-text", "Enter")

    expect(tab.locator(".msg-user .bubble")).to_have_text("line one\nline two")
    answer_bubble = tab.locator(".msg-assistant .bubble")
    expect(answer_bubble.locator("strong")).to_have_text("world")
    expect(answer_bubble).to_contain_text("<script>alert(1)</script>")  # shown as text, not run
    expect(tab.locator("#composer-text")).to_be_enabled()
    expect(tab).to_have_url(re.compile(r"/assistant/c/[0-9a-f-]{36}/$"))
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["line one line two"])
    expect(tab.locator("#chat-title")).to_have_text("line one line two")


def test_a_proposed_write_waits_on_a_card_and_confirm_makes_it_in_every_tab(
    browser_context, tab, user, endpoint, model_server
):
    # given a chat open in two tabs
    model_server.push(answer("Hi."), tool_calls(("notes_create", {"title": "Buy milk"})))
    sign_in(tab, user)
    send(tab, "hello")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Hi.")
    expect(tab.locator("#composer-text")).to_be_enabled()
    other = browser_context.new_page()
    other.goto(tab.url)
    expect(other.locator(".msg-assistant .bubble")).to_have_text("Hi.")
    expect(other.locator("#connection")).to_be_hidden()

    # when the model proposes a note
    send(tab, "make a note to buy milk")
    for page in (tab, other):
        card = page.locator(".card")
        expect(card).to_have_attribute("data-status", "waiting")
        expect(card.locator(".card-preview dt:text-is('Title') + dd")).to_have_text("Buy milk")
        expect(page.locator(".msg-user")).to_have_count(2)
    assert not Note.objects.exists()

    # then Confirm makes it, and both tabs show the outcome
    tab.locator(".card .card-confirm").click()
    for page in (tab, other):
        expect(page.locator(".card")).to_have_attribute("data-status", "done")
        expect(page.locator(".card .card-confirm")).to_be_hidden()
        expect(page.locator('[data-notice-code="confirmation_done"] .notice-text')).to_have_text("Done: Create a note.")
    assert list(Note.objects.filter(owner=user).values_list("title", flat=True)) == ["Buy milk"]


def test_cancel_makes_nothing_and_the_card_says_cancelled(tab, user, endpoint, model_server):
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    sign_in(tab, user)
    send(tab, "make a note to buy milk")
    tab.locator(".card .card-cancel").click()
    expect(tab.locator(".card")).to_have_attribute("data-status", "cancelled")
    expect(tab.locator(".card .card-status")).to_have_text("Cancelled.")
    expect(tab.locator('[data-notice-code="confirmation_cancelled"]')).to_be_visible()
    assert not Note.objects.exists()


def test_stop_during_a_slow_answer_frees_the_composer(tab, user, endpoint, model_server):
    model_server.push(answer("too late", delay=3))
    sign_in(tab, user)
    send(tab, "take your time")
    expect(tab.locator("#working")).to_be_visible()
    expect(tab.locator("#composer-text")).to_be_enabled()  # typing goes on while the assistant works
    tab.locator("#stop").click()
    expect(tab.locator('[data-notice-code="stopped"] .notice-text')).to_have_text("Stopped.")
    expect(tab.locator("#composer-text")).to_be_enabled()
    expect(tab.locator("#stop")).to_be_hidden()
    expect(tab.locator("#working")).to_be_hidden()
    expect(tab.locator(".msg-assistant")).to_have_count(0)


def test_a_refusal_is_a_clear_message_and_the_text_stays(tab, user):
    sign_in(tab, user)  # no endpoint configured
    send(tab, "hello?")
    expect(tab.locator("#composer-error")).to_have_text(
        "No model is configured for the assistant yet. Ask the site's staff."
    )
    expect(tab.locator("#composer-text")).to_have_value("hello?")
    expect(tab.locator("#composer-text")).to_be_enabled()


def test_chats_list_newest_first_and_rename_and_delete_through_dialogs(tab, user):
    older = ConversationFactory(user=user, title="Older chat")
    append_message(older.pk, role=Message.Role.USER, content="first")
    newer = ConversationFactory(user=user, title="Newer chat")
    append_message(newer.pk, role=Message.Role.USER, content="second")
    sign_in(tab, user)
    links = tab.locator("#chat-list .chat-link")
    expect(links).to_have_text(["Newer chat", "Older chat"])

    links.first.click()
    expect(tab.locator(".msg-user .bubble")).to_have_text(["second"])
    tab.locator("#rename-chat").click()
    tab.fill("#rename-title", "Renamed chat")
    tab.press("#rename-title", "Enter")
    expect(links).to_have_text(["Renamed chat", "Older chat"])
    expect(tab.locator("#chat-title")).to_have_text("Renamed chat")

    tab.locator("#delete-chat").click()
    expect(tab.locator("#delete-dialog")).to_be_visible()
    tab.locator("#delete-form button[type=submit]").click()
    expect(links).to_have_text(["Older chat"])
    expect(tab.locator("#chat-title")).to_have_text("New chat")
    newer.refresh_from_db()
    assert newer.status == "deleted"


def test_long_lists_load_more_on_scroll(tab, user):
    chats = [ConversationFactory(user=user, title=f"chat {n:02}") for n in range(23)]
    for n in range(60):
        append_message(chats[-1].pk, role=Message.Role.USER, content=f"m{n:02}")
    sign_in(tab, user, path=f"/assistant/c/{chats[-1].pk}/")
    messages = tab.locator(".msg-user .bubble")
    expect(messages).to_have_count(50)
    expect(messages.first).to_have_text("m10")
    tab.locator("#messages").evaluate("box => { box.scrollTop = 0; }")
    expect(messages).to_have_count(60)
    expect(messages.first).to_have_text("m00")
    expect(messages.last).to_have_text("m59")

    links = tab.locator("#chat-list .chat-link")
    expect(links).to_have_count(20)
    tab.locator("#chat-list-box").evaluate("box => { box.scrollTop = box.scrollHeight; }")
    expect(links).to_have_count(23)
    expect(links.first).to_have_text("chat 22")


def test_signing_out_in_another_tab_shows_signed_out_and_stops(browser_context, tab, user):
    sign_in(tab, user)
    other = browser_context.new_page()
    other.goto("/assistant/")
    other.locator(".logout-form button").click()
    expect(other).not_to_have_url(re.compile(r"/assistant/"))  # wherever the site's logout leads
    expect(tab.locator("#banner")).to_contain_text("You were signed out. Sign in again to go on.")
    expect(tab.locator("#banner a")).to_have_attribute("href", re.compile(r"^/accounts/login/\?next="))
    expect(tab.locator("#composer-text")).to_be_disabled()
    expect(tab.locator("#new-chat")).to_be_disabled()
    expect(tab.locator("#connection")).to_be_hidden()


def test_on_a_phone_the_chat_list_is_a_drawer(tab, user):
    chat = ConversationFactory(user=user, title="Pocket chat")
    append_message(chat.pk, role=Message.Role.USER, content="small screen")
    tab.set_viewport_size({"width": 390, "height": 760})
    sign_in(tab, user)
    expect(tab.locator("#sidebar")).to_be_hidden()
    tab.locator("#toggle-sidebar").click()
    expect(tab.locator("#toggle-sidebar")).to_have_attribute("aria-expanded", "true")
    tab.locator("#chat-list .chat-link").click()
    expect(tab.locator("#sidebar")).to_be_hidden()
    expect(tab.locator(".msg-user .bubble")).to_have_text(["small screen"])
    box = tab.locator("#composer").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390


def test_after_a_server_restart_the_page_resyncs_without_duplicates(tab, user, asgi_server):
    chat = ConversationFactory(user=user, title="Live chat")
    append_message(chat.pk, role=Message.Role.USER, content="before")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    expect(tab.locator(".msg-user .bubble")).to_have_text(["before"])

    asgi_server.stop()
    expect(tab.locator("#connection")).to_be_visible()
    append_message(chat.pk, role=Message.Role.USER, content="while away")
    asgi_server.start()

    expect(tab.locator("#connection")).to_be_hidden(timeout=20_000)
    expect(tab.locator(".msg-user .bubble")).to_have_text(["before", "while away"])
    append_message(chat.pk, role=Message.Role.USER, content="after")
    expect(tab.locator(".msg-user .bubble")).to_have_text(["before", "while away", "after"])


def test_notices_come_in_the_users_language(tab, user, endpoint, model_server):
    UserSettingsFactory(user=user, language="ru")
    model_server.push(error(401))
    sign_in(tab, user)
    expect(tab.locator("html")).to_have_attribute("lang", "ru")
    send(tab, "привет")
    notice = tab.locator('[data-notice-code="model_failed"] .notice-text')
    expect(notice).to_be_visible()
    with translation.override("ru"):
        russian = notices.text("model_failed", {"code": "invalid_api_key"})
    with translation.override("en"):
        english = notices.text("model_failed", {"code": "invalid_api_key"})
    assert russian != english, "the ru catalogue translates the notice"
    expect(notice).to_have_text(russian)


def test_a_new_chat_past_the_quota_is_refused_with_a_clear_message(tab, user):
    # given: the user started NEW_CHATS_PER_MINUTE chats (20 by default) in the last minute
    ConversationFactory.create_batch(20, user=user)
    sign_in(tab, user)
    # when: one more is asked for by the first message of a new chat
    send(tab, "hello?")
    # then: the composer says which quota and when to try again, and keeps the text
    expect(tab.locator("#composer-error")).to_contain_text(
        "You started 20 chats in the last minute, the most allowed is 20. Try again in "
    )
    expect(tab.locator("#composer-text")).to_have_value("hello?")
