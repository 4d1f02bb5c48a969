"""The composer keeps what is written: long pastes, words typed during a turn, words left for later."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from agent.core.conf import agent_settings
from agent.models import Attachment, Conversation, Message
from tests.support.browser import paste, send, sign_in
from tests.support.factories import ConversationFactory
from tests.support.model_server import answer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_paste_too_long_for_a_message_goes_whole_as_a_text_file_the_model_reads(tab, user, endpoint, model_server):
    # given a paste of 100,000 characters, over the message limit
    model_server.push(answer("A long one."))
    pasted = "START-OF-PASTE " + "x" * (100_000 - len("START-OF-PASTE "))
    sign_in(tab, user)

    # when it is pasted, then sent with a question
    paste(tab, pasted)

    # then it is a file of the message, named and whole, and the box holds nothing cut
    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip.locator(".agent-file-name")).to_have_text("pasted.txt")
    expect(chip).to_have_attribute("data-status", "ready")
    expect(tab.locator("#composer-text")).to_have_value("")
    stored = Attachment.objects.get()
    assert (stored.name, stored.size) == ("pasted.txt", 100_000)
    send(tab, "what did I paste?")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("A long one.")
    expect(tab.locator(".msg-user .agent-file-name")).to_have_text("pasted.txt")
    assert "START-OF-PASTE xxx" in json.dumps(model_server.requests[-1]["messages"][-1])


def test_a_counter_shows_near_the_limit_and_a_text_over_it_is_not_sent(tab, user):
    limit = agent_settings.HISTORY_CHARS
    sign_in(tab, user)
    count = tab.locator("#composer-count")
    tab.fill("#composer-text", "short")
    expect(count).to_be_hidden()

    tab.fill("#composer-text", "y" * (limit - 10))
    expect(count).to_be_visible()
    expect(count).to_contain_text(f"{limit - 10:,} of {limit:,}")

    tab.fill("#composer-text", "y" * (limit + 5))
    expect(count).to_contain_text("5 too many")
    expect(tab.locator("#send")).to_be_disabled()
    tab.press("#composer-text", "Enter")
    expect(tab.locator("#composer-text")).to_have_value("y" * (limit + 5))  # kept, never cut
    assert not Conversation.objects.exists()


def test_a_message_typed_while_a_turn_runs_is_queued_and_sent_after_it(tab, user, endpoint, model_server):
    model_server.push(answer("first answer", delay=2), answer("second answer"))
    sign_in(tab, user)
    send(tab, "first question")
    expect(tab.locator("#working")).to_be_visible()

    # the box stays open for typing, and Enter queues
    expect(tab.locator("#composer-text")).to_be_enabled()
    expect(tab.locator("#composer-text")).to_be_focused()
    send(tab, "second question")
    expect(tab.locator("#queued .msg-queued .bubble")).to_have_text("second question")
    expect(tab.locator("#composer-text")).to_have_value("")

    expect(tab.locator(".msg-assistant .bubble")).to_have_text(["first answer", "second answer"])
    expect(tab.locator(".msg-user .bubble")).to_have_text(["first question", "second question"])
    expect(tab.locator("#queued")).to_be_hidden()
    assert "second question" in json.dumps(model_server.requests[-1]["messages"][-1])


def test_a_queued_message_can_be_cancelled_and_its_words_come_back(tab, user, endpoint, model_server):
    model_server.push(answer("slow answer", delay=2))
    sign_in(tab, user)
    send(tab, "first question")
    expect(tab.locator("#working")).to_be_visible()
    send(tab, "never mind")
    tab.locator("#queued .queued-cancel").click()

    expect(tab.locator("#queued")).to_be_hidden()
    expect(tab.locator("#composer-text")).to_have_value("never mind")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("slow answer")
    expect(tab.locator(".msg-user .bubble")).to_have_text(["first question"])
    assert Message.objects.filter(role="user").count() == 1


def test_unsent_words_survive_a_reload_and_go_once_sent(tab, user, endpoint, model_server):
    chat = ConversationFactory(user=user, title="Plans")
    other = ConversationFactory(user=user, title="Other")
    model_server.push(answer("Noted."))
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    tab.fill("#composer-text", "half a thought")

    tab.reload()
    expect(tab.locator("#composer-text")).to_have_value("half a thought")
    tab.locator("#chat-list .chat-link", has_text="Other").click()
    expect(tab).to_have_url(re.compile(str(other.pk)))
    expect(tab.locator("#composer-text")).to_have_value("")  # each chat keeps its own
    tab.locator("#chat-list .chat-link", has_text="Plans").click()
    expect(tab.locator("#composer-text")).to_have_value("half a thought")

    tab.press("#composer-text", "Enter")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Noted.")
    tab.reload()
    expect(tab.locator(".msg-user .bubble")).to_have_text("half a thought")
    expect(tab.locator("#composer-text")).to_have_value("")


def test_a_draft_shows_a_list_formatted_while_it_streams(tab, user, endpoint, model_server):
    items = "\n".join(f"- idea {n}" for n in range(1, 16))
    model_server.push(answer("Some _ideas_:\n\n" + items, chunk_delay=0.15))
    sign_in(tab, user)
    send(tab, "ideas please")

    draft = tab.locator("#draft .msg-draft .bubble.markdown")
    expect(draft.locator("li").first).to_have_text("idea 1")
    expect(draft.locator("em")).to_have_text("ideas")
    assert not Message.objects.filter(role="assistant").exists()
    assert "- idea" not in (draft.text_content() or "")

    stored = tab.locator("#message-log .msg-assistant .bubble.markdown")
    expect(stored.locator("li")).to_have_count(15)
    expect(tab.locator("#draft")).to_be_hidden()


def test_focus_returns_to_the_message_box_after_a_card_is_decided_by_keyboard(tab, user, endpoint, model_server):
    from tests.support.model_server import tool_calls

    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})), answer("Done."))
    sign_in(tab, user)
    send(tab, "note: buy milk")
    confirm = tab.locator(".card .card-confirm")
    expect(confirm).to_be_enabled()
    confirm.focus()
    tab.keyboard.press("Enter")

    expect(tab.locator(".card")).to_have_attribute("data-status", "done")
    expect(tab.locator("#composer-text")).to_be_focused()


def test_the_delete_dialog_opens_on_cancel(tab, user):
    chat = ConversationFactory(user=user, title="Keep me")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    tab.locator("#delete-chat").click()
    expect(tab.locator("#delete-dialog")).to_be_visible()
    expect(tab.locator("#delete-dialog .dialog-close")).to_be_focused()
    tab.keyboard.press("Enter")
    expect(tab.locator("#delete-dialog")).to_be_hidden()
    assert Conversation.objects.get(pk=chat.pk).status == "active"


def test_a_chat_restored_from_the_archive_says_where_it_went(tab, user):
    chat = ConversationFactory(user=user, title="Old plans", status="archived")
    sign_in(tab, user)
    tab.locator("#show-archived").click()
    tab.locator("#chat-list .chat-link", has_text="Old plans").click()
    tab.locator("#restore-chat").click()

    expect(tab.locator("#chat-list-status")).to_contain_text("“Old plans” is back among your chats.")
    tab.locator("#chat-list-status button").click()
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["Old plans"])
    assert Conversation.objects.get(pk=chat.pk).status == "active"


def test_an_archived_chat_that_gets_a_message_is_listed_again(tab, user, endpoint, model_server):
    chat = ConversationFactory(user=user, title="Old plans", status="archived")
    model_server.push(answer("Back."))
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    expect(tab.locator("#chat-title .badge")).to_have_text("archived")
    expect(tab.locator("#chat-list .chat-link")).to_have_count(0)
    send(tab, "one more thing")

    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Back.")
    expect(tab.locator("#chat-list .chat-link")).to_have_text(["Old plans"])
    expect(tab.locator("#chat-title .badge")).to_have_count(0)


def test_attach_cancelled_in_a_new_chat_leaves_no_empty_chat(tab, user):
    sign_in(tab, user)
    with tab.expect_file_chooser() as chooser:
        tab.locator("#attach").click()
    chooser.value.set_files(files=[])  # the picker closed with nothing picked
    tab.wait_for_timeout(500)
    assert not Conversation.objects.exists()
    expect(tab.locator("#chat-list .chat-link")).to_have_count(0)


def test_the_header_names_the_model_that_answers(tab, user, endpoint):
    sign_in(tab, user)
    expect(tab.locator("#chat-model")).to_have_text("Answers: scripted · The site's default model.")
