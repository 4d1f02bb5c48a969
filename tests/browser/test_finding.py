"""Finding chats in the browser: the archive and restore, search, and an address bar that names a live chat."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agent.conversations import append_message
from agent.models import Conversation, Message
from tests.support.browser import sign_in
from tests.support.factories import ConversationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def chat_with(user, title, text, status="active"):
    chat = ConversationFactory(user=user, title=title)
    append_message(chat.pk, role=Message.Role.USER, content=text)
    Conversation.objects.filter(pk=chat.pk).update(status=status)
    return chat


def test_archive_then_restore_from_the_archived_list(tab, user):
    chat = chat_with(user, "Holiday plans", "where shall we go?")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    links = tab.locator("#chat-list .chat-link")
    expect(links).to_have_text(["Holiday plans"])

    tab.locator("#archive-chat").click()
    expect(links).to_have_count(0)
    expect(tab.locator("#restore-chat")).to_be_visible()

    tab.locator("#show-archived").click()
    expect(tab.locator("#show-archived")).to_have_attribute("aria-pressed", "true")
    expect(links).to_have_text(["Holiday plans"])
    tab.goto("/assistant/")  # away, then back through the archive
    expect(tab.locator("#connection")).to_be_hidden()
    tab.locator("#show-archived").click()
    links.first.click()
    expect(tab.locator(".msg-user .bubble")).to_have_text(["where shall we go?"])
    tab.locator("#restore-chat").click()

    expect(tab.locator("#archive-chat")).to_be_visible()
    expect(links).to_have_count(0)  # it left the archive
    tab.locator("#show-archived").click()
    expect(links).to_have_text(["Holiday plans"])
    assert Conversation.objects.get(pk=chat.pk).status == "active"


def test_search_finds_chats_by_title_and_by_text_and_clearing_it_shows_all(tab, user):
    chat_with(user, "Garden", "tomatoes and beans")
    chat_with(user, "Car", "the garage called", status="archived")
    chat_with(user, "Taxes", "forms due in April")
    sign_in(tab, user)
    links = tab.locator("#chat-list .chat-link")
    expect(links).to_have_count(2)

    tab.fill("#chat-search", "tomatoes")
    expect(links).to_have_text(["Garden"])
    tab.fill("#chat-search", "garage")
    expect(links).to_have_text([re.compile(r"^Car archived$")])
    tab.fill("#chat-search", "nothing like this")
    expect(tab.locator("#chat-list-status")).to_have_text("No chats match your search.")
    tab.fill("#chat-search", "")
    expect(links).to_have_text(["Taxes", "Garden"])


def test_after_delete_the_address_bar_names_the_list_and_back_does_not_return_to_the_dead_chat(tab, user):
    first = chat_with(user, "First", "one")
    second = chat_with(user, "Second", "two")
    sign_in(tab, user, path=f"/assistant/c/{first.pk}/")
    tab.locator("#chat-list .chat-link", has_text="Second").click()
    expect(tab).to_have_url(re.compile(f"/c/{second.pk}/$"))

    tab.locator("#delete-chat").click()
    tab.locator("#delete-form button[type=submit]").click()

    expect(tab).to_have_url(re.compile(r"/assistant/$"))
    tab.go_back()
    expect(tab).to_have_url(re.compile(f"/c/{first.pk}/$"))
    expect(tab.locator(".msg-user .bubble")).to_have_text(["one"])


def test_opening_the_address_of_a_deleted_chat_moves_to_the_list(tab, user):
    gone = chat_with(user, "Gone", "bye", status="deleted")
    sign_in(tab, user, path=f"/assistant/c/{gone.pk}/")

    expect(tab).to_have_url(re.compile(r"/assistant/$"))
    expect(tab.locator("#banner")).to_have_text("This chat is no longer there.")
