"""The composer's files on the chat page (attachments.js imported as a module): attach, read, send."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import Locator, Page, Route, expect

from agent.core import errors
from agent.models import Attachment
from tests.support.browser import send, sign_in
from tests.support.factories import ConversationFactory
from tests.support.files import pdf_bytes, picture_bytes
from tests.support.model_server import answer

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


def test_a_message_sent_while_its_file_is_being_removed_goes_without_the_file(tab, user, endpoint, model_server):
    model_server.push(answer("Hello."))
    sign_in(tab, user)
    with tab.expect_file_chooser() as chooser:
        tab.locator("#attach").click()
    chooser.value.set_files(files=[{"name": "list.txt", "mimeType": "text/plain", "buffer": b"milk, bread"}])
    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip).to_have_attribute("data-status", "ready")
    held = []  # the removal stays under way until the test lets it through
    tab.route("**/attachments/*/remove/", lambda route: held.append(route))

    with tab.expect_request("**/attachments/*/remove/"):
        chip.locator(".agent-file-remove").click()
    send(tab, "hello")

    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Hello.")
    expect(tab.locator("#composer-error")).to_have_text("")
    assert "milk, bread" not in json.dumps(model_server.requests[-1]["messages"], ensure_ascii=False)
    with tab.expect_response("**/attachments/*/remove/") as removal:
        held[0].continue_()
    assert removal.value.ok
    expect(chip).to_have_count(0)
    assert not Attachment.objects.exists()


def session_gone(route: Route) -> None:
    """The server's answer to a call of a session that ended, without ending the tab's own session."""
    route.fulfill(status=401, content_type="application/json", body=json.dumps(errors.error_body(errors.SessionGone())))


def test_a_file_s_removal_refused_for_an_ended_session_offers_to_sign_in_again(tab, user):
    chat = ConversationFactory(user=user, title="Files")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    pick(tab, ["list.txt"])
    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip).to_have_attribute("data-status", "ready")
    tab.route("**/attachments/*/remove/", session_gone)

    chip.locator(".agent-file-remove").click()

    expect(tab.locator("#banner")).to_contain_text("You were signed out. Sign in again to go on.")
    expect(tab.locator("#banner a")).to_have_attribute("href", re.compile(r"^/accounts/login/\?next="))
    expect(chip).to_have_attribute("data-status", "ready")  # not removed: the server still has it


def test_an_upload_refused_for_an_ended_session_says_so_and_offers_to_sign_in_again(tab, user):
    chat = ConversationFactory(user=user, title="Files")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    tab.route("**/attachments/upload/**", session_gone)

    pick(tab, ["list.txt"])

    chip = tab.locator("#composer-files .agent-file-chip")
    expect(chip).to_have_attribute("data-status", "failed")
    expect(chip.locator(".agent-file-status")).to_have_text(str(errors.SessionGone().message))
    expect(tab.locator("#banner")).to_contain_text("You were signed out. Sign in again to go on.")


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


def pick(tab: Page, names: list[str]) -> None:
    tab.locator("#composer input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "text/plain", "buffer": name.encode() * 50} for name in names]
    )


def test_seven_files_keep_the_first_five_in_the_order_picked(tab, user, endpoint, model_server):
    chat = ConversationFactory(user=user, title="Files")
    model_server.push(answer("Five files."))
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    names = [f"file-{n}.txt" for n in range(1, 8)]
    pick(tab, names)

    chips = tab.locator("#composer-files .agent-file-chip")
    expect(chips.locator(".agent-file-name")).to_have_text(names)
    for name in names[:5]:
        expect(chips.filter(has_text=name)).to_have_attribute("data-status", "ready")
    for name in names[5:]:
        refused = chips.filter(has_text=name)
        expect(refused).to_have_attribute("data-status", "failed")
        expect(refused.locator(".agent-file-status")).to_have_text("Not attached: at most 5 files go with one message.")
    assert list(Attachment.objects.order_by("created_at").values_list("name", flat=True)) == names[:5]

    send(tab, "read them")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("Five files.")
    expect(tab.locator(".msg-user .agent-file-name")).to_have_text(names[:5])
    expect(chips).to_have_count(0)  # the refused ones go too, once the message is sent
    sent = json.dumps(model_server.requests[-1]["messages"][-1])
    assert [sent.index(name) for name in names[:5]] == sorted(sent.index(name) for name in names[:5])


def test_a_file_over_the_size_limit_or_of_another_type_is_refused_before_it_uploads(tab, user):
    chat = ConversationFactory(user=user, title="Files")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    uploads: list[str] = []
    tab.on(
        "request",
        lambda request: "/attachments/" in request.url and request.method == "POST" and uploads.append(request.url),
    )

    tab.locator("#composer input[type=file]").set_input_files(
        files=[
            {"name": "huge.txt", "mimeType": "text/plain", "buffer": b"a" * (21 * 1024 * 1024)},
            {"name": "tool.exe", "mimeType": "application/octet-stream", "buffer": b"MZ"},
        ],
        timeout=30_000,  # 21 MB through the browser's protocol
    )
    chips = tab.locator("#composer-files .agent-file-chip")
    expect(chips.filter(has_text="huge.txt").locator(".agent-file-status")).to_have_text(
        "Larger than 20 MB, the limit for one file."
    )
    expect(chips.filter(has_text="tool.exe").locator(".agent-file-status")).to_contain_text(
        "This kind of file cannot be attached. Accepted: .txt, .text, .md"
    )
    tab.wait_for_timeout(300)
    assert uploads == [] and not Attachment.objects.exists()


def test_files_dropped_anywhere_on_the_chat_show_an_overlay_and_attach(tab, user):
    chat = ConversationFactory(user=user, title="Files")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    dropped = tab.evaluate_handle(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(["eggs"], "eggs.txt", {type: "text/plain"}));
            return data;
        }"""
    )
    tab.locator("#messages").dispatch_event("dragenter", {"dataTransfer": dropped})
    expect(tab.locator("#drop-overlay")).to_be_visible()
    tab.locator("#messages").dispatch_event("drop", {"dataTransfer": dropped})
    expect(tab.locator("#drop-overlay")).to_be_hidden()
    expect(tab.locator("#composer-files .agent-file-chip")).to_have_attribute("data-status", "ready")


def test_a_sent_picture_opens_large_and_sent_files_are_download_links(tab, user, endpoint, model_server):
    endpoint.supports_images = True
    endpoint.save()
    chat = ConversationFactory(user=user, title="Pictures")
    model_server.push(answer("A square and a note."))
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    tab.locator("#composer input[type=file]").set_input_files(
        files=[
            {"name": "square.png", "mimeType": "image/png", "buffer": picture_bytes("PNG")},
            {"name": "note.txt", "mimeType": "text/plain", "buffer": b"a note"},
        ]
    )
    expect(tab.locator("#composer-files .agent-file-chip[data-status=ready]")).to_have_count(2)
    send(tab, "look")
    expect(tab.locator(".msg-assistant .bubble")).to_have_text("A square and a note.")

    message = tab.locator(".msg-user")
    links = message.locator("a.agent-file-name")
    expect(links).to_have_text(["square.png", "note.txt"])
    for name in ("square.png", "note.txt"):
        stored = Attachment.objects.get(name=name)
        expect(links.filter(has_text=name)).to_have_attribute("href", f"/assistant/api/attachments/{stored.pk}/file/")
    with tab.expect_download() as download:
        links.filter(has_text="note.txt").click()
    assert download.value.suggested_filename == "note.txt"

    message.locator(".agent-file-open").click()
    dialog = tab.locator("#picture-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("img.picture-large")).to_have_attribute("alt", "square.png")
    assert dialog.locator("img.picture-large").evaluate("(image) => image.complete && image.naturalWidth > 0")
    tab.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(message.locator(".agent-file-open")).to_be_focused()
