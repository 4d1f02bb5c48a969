"""The composer's files on the chat page (attachments.js imported as a module): attach, read, send."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import Locator, expect

from agent.models import Attachment
from tests.attachments.conftest import pdf_bytes, picture_bytes
from tests.factories import ConversationFactory
from tests.model_server import answer

from .test_chat import send, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_file_attached_in_a_new_chat_is_read_and_goes_with_the_message(tab, user, endpoint, model_server):
    model_server.push(answer("It lists milk."))
    sign_in(tab, user)

    with tab.expect_file_chooser() as chooser:
        tab.locator("#attach").click()  # a new chat is made for the file first
    chooser.value.set_files(files=[{"name": "list.txt", "mimeType": "text/plain", "buffer": b"milk, bread"}])

    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip).to_have_attribute("data-status", "ready")
    send(tab, "what is on my list?")

    expect(tab.locator(".msg-assistant .bubble")).to_have_text("It lists milk.")
    expect(chip).to_have_count(0)  # sent: the chips leave the composer
    assert "milk, bread" in json.dumps(model_server.requests[-1]["messages"][-1], ensure_ascii=False)


def test_a_file_dropped_with_no_chat_open_starts_one_and_is_read_there(tab, user, endpoint, model_server):
    sign_in(tab, user)
    dropped = tab.evaluate_handle(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(["eggs, flour"], "shopping.txt", {type: "text/plain"}));
            return data;
        }"""
    )
    tab.locator("#composer").dispatch_event("drop", {"dataTransfer": dropped})

    expect(tab).to_have_url(re.compile(r"/assistant/c/[0-9a-f-]{36}/$"))
    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip).to_have_attribute("data-status", "ready")
    chat = tab.url.rstrip("/").rsplit("/", 1)[-1]
    assert list(Attachment.objects.values_list("conversation_id", "name")) == [(uuid.UUID(chat), "shopping.txt")]


FILE_NAMES = ("report.pdf", "square.png")


def expect_files_on(message: Locator) -> None:
    """Both files' chips, in either order: the two uploads may be stored in either order."""
    names = message.locator(".agent-file-name")
    expect(names).to_have_count(len(FILE_NAMES))
    for name in FILE_NAMES:
        expect(names.filter(has_text=name)).to_have_count(1)


def test_a_pdf_and_a_picture_reach_the_model_as_text_and_image_and_stay_on_the_message(
    tab, user, endpoint, model_server
):
    endpoint.supports_images = True
    endpoint.save()
    chat = ConversationFactory(user=user, title="Receipts")  # the file input uploads only into an open chat
    model_server.push(answer("Two pages and a red square."))
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")

    tab.locator("#composer input[type=file]").set_input_files(
        files=[
            {
                "name": "report.pdf",
                "mimeType": "application/pdf",
                "buffer": pdf_bytes(["walrus ledger", "zeppelin quota"]),
            },
            {"name": "square.png", "mimeType": "image/png", "buffer": picture_bytes("PNG")},
        ]
    )
    chips = tab.locator("#composer-files .agent-file-chip")
    expect(chips).to_have_count(2)
    for name in FILE_NAMES:
        expect(chips.filter(has_text=name)).to_have_attribute("data-status", "ready")
    send(tab, "what did I send?")

    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Two pages and a red square.")
    user_message = tab.locator(".msg-user")
    expect(user_message.locator(".bubble")).to_have_text("what did I send?")
    expect_files_on(user_message)
    expect(user_message.locator("img.agent-file-thumb")).to_have_attribute("alt", "square.png")
    tab.reload()  # the files stay on the message when the chat is read again
    expect_files_on(tab.locator(".msg-user"))

    content = model_server.requests[-1]["messages"][-1]["content"]
    text_part, image_part = content
    assert text_part["type"] == "text"
    assert "what did I send?" in text_part["text"]
    assert "walrus ledger" in text_part["text"] and "zeppelin quota" in text_part["text"]
    assert image_part["type"] == "image_url"
    assert image_part["image_url"]["url"].startswith("data:image/png;base64,")


def test_a_file_past_the_stored_bytes_quota_says_so_on_its_chip(tab, user):
    # given: the user's files already take the 500 MB they may store (by default)
    chat, earlier = ConversationFactory(user=user), ConversationFactory(user=user)
    Attachment.objects.create(
        user=user, conversation=earlier, name="old.bin", content_type="text/plain", size=500 * 1024 * 1024, file="x"
    )
    sign_in(tab, user, f"/assistant/c/{chat.pk}/")
    # when: one more file is attached
    with tab.expect_file_chooser() as chooser:
        tab.locator("#attach").click()
    chooser.value.set_files(files=[{"name": "list.txt", "mimeType": "text/plain", "buffer": b"milk, bread"}])
    # then: its chip failed, with the quota's own words
    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip).to_have_attribute("data-status", "failed")
    expect(chip.locator(".agent-file-status")).to_contain_text("does not fit: your files take 500.0")
