"""Files in the history and pictures for the model."""

from __future__ import annotations

import base64
import io
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent import attachments
from agent.access import SessionRef
from agent.ai import AIError
from agent.ai.providers import OpenAICompatible
from agent.attachments import pictures
from agent.conversations import append_message
from agent.core.events import topic
from agent.models import Attachment, Endpoint
from agent.turns import history
from tests.support.files import picture_bytes, ready, upload
from tests.support.layer import Listener
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db


def file(name: str, text: str = "", *, picture: bool = False, complete: bool = True) -> Any:
    return SimpleNamespace(name=name, text=text, is_picture=picture, text_complete=complete)


# -- user_content ---------------------------------------------------------------------------


def test_without_files_the_text_is_the_content() -> None:
    assert history.user_content("hello", [], 100) == "hello"


def test_each_text_file_gets_an_equal_share_of_the_limit_and_says_what_was_left_out() -> None:
    content = history.user_content("compare", [file("a.txt", "A" * 80), file("b.txt", "B" * 30)], 100)
    assert content == (
        "compare\n\n[file: a.txt]\n" + "A" * 50 + "\n\n[only part of a.txt is shown: 30 characters were left out]"
        "\n\n[file: b.txt]\n" + "B" * 30
    )


def test_pictures_take_no_share_and_are_named_by_a_line() -> None:
    content = history.user_content("look", [file("cat.png", picture=True), file("a.txt", "A" * 100)], 100)
    assert content == "look\n\n[picture: cat.png]\n\n[file: a.txt]\n" + "A" * 100


def test_a_file_cut_by_extraction_says_so_without_a_count() -> None:
    content = history.user_content("x", [file("big.pdf", "start", complete=False)], 100)
    assert content.endswith(
        "[file: big.pdf]\nstart\n\n[only part of big.pdf is shown: the file holds more than its extracted text]"
    )


def test_the_left_out_count_is_of_the_whole_stored_text_when_only_its_head_was_read() -> None:
    head = SimpleNamespace(name="a.txt", text="A" * 60, text_length=1000, is_picture=False, text_complete=True)
    assert history.user_content("x", [head], 50).endswith("950 characters were left out]")


def test_the_phrases_are_in_the_users_language() -> None:
    from django.utils import translation

    with translation.override("ru"):
        content = history.user_content("x", [file("a.txt", "A" * 10)], 5)
    assert "[file: a.txt]" not in content and "a.txt" in content


# -- the history reads the files of earlier messages ------------------------------------------------


def test_history_shows_an_earlier_messages_files_from_the_database(ref: SessionRef, chat: Any) -> None:
    # given: an earlier message with a text file and a picture
    message = append_message(chat.pk, role="user", content="see the files")
    text = ready(attachments.add_attachment(ref, chat.pk, upload("a.txt", b"x"), impersonated=False), text="T" * 5000)
    photo = ready(attachments.add_attachment(ref, chat.pk, upload("p.png", picture_bytes()), impersonated=False))
    Attachment.objects.filter(pk__in=[text.pk, photo.pk]).update(message=message)
    append_message(chat.pk, role="assistant", content="seen")
    # when
    entries = history.load(chat.pk, {"role": "user", "content": "next"}, 3000)
    # then: the text file shares what is left of the window, and says how much was left out
    earlier = entries[0]["content"]
    assert [e["content"] for e in entries[1:]] == ["seen", "next"]
    assert earlier.startswith("see the files\n\n[file: a.txt]\nTTT") and earlier.endswith("\n\n[picture: p.png]")
    assert f"[only part of a.txt is shown: {5000 - earlier.count('T')} characters were left out]" in earlier
    assert sum(len(e["content"]) for e in entries) <= 3000
    assert 2500 < earlier.count("T") < 3000
    whole = history.load(chat.pk, {"role": "user", "content": "next"}, 10_000)[0]["content"]
    assert whole.count("T") == 5000 and "left out" not in whole


def test_history_reads_files_with_one_query_per_page(ref: SessionRef, chat: Any) -> None:
    for n in range(5):
        message = append_message(chat.pk, role="user", content=f"m{n}")
        row = ready(
            attachments.add_attachment(ref, chat.pk, upload(f"{n}.txt", b"x"), impersonated=False), text=f"file {n}"
        )
        Attachment.objects.filter(pk=row.pk).update(message=message)
    with CaptureQueriesContext(connection) as queries:
        entries = history.load(chat.pk, {"role": "user", "content": "now"}, 10_000)
    assert len(entries) == 6 and "file 4" in entries[-2]["content"]
    assert len(queries.captured_queries) == 2  # the page of messages, then the files of its messages


# -- pictures for the model ------------------------------------------------------------------------


def test_user_parts_put_each_picture_after_the_text_as_a_data_url(ref: SessionRef, chat: Any) -> None:
    photo = ready(attachments.add_attachment(ref, chat.pk, upload("p.png", picture_bytes()), impersonated=False))
    assert pictures.user_parts("text", []) == "text"
    parts = pictures.user_parts("text", [photo])
    assert parts[0] == {"type": "text", "text": "text"}
    url = parts[1]["image_url"]["url"]
    assert parts[1]["type"] == "image_url" and url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == picture_bytes()


def test_a_picture_larger_than_picture_max_px_is_downscaled_for_the_model(ref: SessionRef, chat: Any) -> None:
    from PIL import Image

    photo = attachments.add_attachment(
        ref, chat.pk, upload("p.jpg", picture_bytes("JPEG", size=(300, 150))), impersonated=False
    )
    with agent_conf(PICTURE_MAX_PX=60):
        url = pictures.data_url(ready(photo))
    assert url.startswith("data:image/jpeg;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
        assert image.size == (60, 30)


def test_with_pictures_replaces_only_the_turns_own_entry() -> None:
    messages = [{"role": "user", "content": "old"}, {"role": "user", "content": "new"}]
    parts = [{"type": "text", "text": "new"}]
    assert pictures.with_pictures(messages, parts) == [messages[0], {"role": "user", "content": parts}]
    assert pictures.with_pictures(messages, "new") is messages


def test_only_a_refused_request_is_retried_without_pictures() -> None:
    adapter = OpenAICompatible(Endpoint())
    assert all(adapter.refused_pictures(AIError("api_error", status)) for status in (400, 413, 415, 422))
    assert not any(adapter.refused_pictures(AIError("api_error", status)) for status in (404, 500, 502))
    assert not adapter.refused_pictures(AIError("model_not_found", 404))
    assert not pictures.sees_pictures(Endpoint(supports_images=False)) and not pictures.sees_pictures(None)
    assert pictures.sees_pictures(Endpoint(supports_images=True))


def test_unlink_puts_a_messages_files_back_in_the_composer_and_tells_the_chat(
    ref: SessionRef, chat: Any, django_capture_on_commit_callbacks: Any
) -> None:
    listener = Listener()
    listener.join(topic(chat.pk))
    message = append_message(chat.pk, role="user", content="look")
    photo = ready(attachments.add_attachment(ref, chat.pk, upload("p.png", picture_bytes()), impersonated=False))
    Attachment.objects.filter(pk=photo.pk).update(message=message)
    with django_capture_on_commit_callbacks(execute=True):
        pictures.unlink(message)
    assert [a.pk for a in attachments.list_unlinked(ref, chat.pk, impersonated=False)] == [photo.pk]
    assert listener.receive() == {
        "type": "agent.attachment_processed",
        "conversation": str(chat.pk),
        "attachment": str(photo.pk),
    }


def test_image_parts_reach_the_model_through_the_real_client(
    ref: SessionRef, chat: Any, user: Any, endpoint: Endpoint, model_server: Any
) -> None:
    from agent.ai import complete

    photo = ready(attachments.add_attachment(ref, chat.pk, upload("p.png", picture_bytes()), impersonated=False))
    current = {"role": "user", "content": history.user_content("what is this?", [photo], 1000)}
    messages = pictures.with_pictures([current], pictures.user_parts(current["content"], [photo]))
    complete(endpoint, messages, user=user, source="agent", task="agent.chat")
    [sent] = model_server.requests[0]["messages"]
    assert sent["content"][0] == {"type": "text", "text": "what is this?\n\n[picture: p.png]"}
    assert sent["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
