"""The composer's files on the chat page (attachments.js imported as a module): attach, read, send."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

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
