"""The user's stored bytes (``MAX_STORED_BYTES_PER_USER``) and uploads a minute (``UPLOADS_PER_MINUTE``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from agent import conversations
from agent.access import SessionRef
from agent.attachments.api import add_attachment
from agent.core.errors import StorageFull, TooManyUploads
from agent.models import Attachment, QuotaUse
from tests.support.files import post_file, stored_files, upload
from tests.support.races import at_once
from tests.support.sessions import csrf_client

pytestmark = pytest.mark.django_db


def add(ref: SessionRef, chat: Any, name: str = "a.txt", data: bytes = b"x" * 10) -> Attachment:
    return add_attachment(ref, chat.pk, upload(name, data), impersonated=False)


def test_the_upload_past_the_cap_in_a_minute_is_refused_and_not_stored(
    ref: SessionRef, chat: Any, settings: Any, storage_root: Path
) -> None:
    settings.AGENT = {**settings.AGENT, "UPLOADS_PER_MINUTE": 2}
    add(ref, chat)
    add(ref, chat)
    with pytest.raises(TooManyUploads) as refused:
        add(ref, chat)
    params = refused.value.params
    assert (refused.value.code, refused.value.http_status) == ("too_many_uploads", 429)
    assert (params["limit"], params["cap"], params["used"]) == ("uploads_per_minute", 2, 2) and params["frees_at"]
    assert Attachment.objects.count() == 2 and len(stored_files(storage_root)) == 2


def test_uploads_count_across_the_users_chats_and_free_up_after_a_minute(
    ref: SessionRef, chat: Any, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "UPLOADS_PER_MINUTE": 2}
    other_chat = conversations.create_conversation(ref, {}, impersonated=False)
    add(ref, chat)
    add(ref, other_chat)
    with pytest.raises(TooManyUploads):
        add(ref, other_chat)
    QuotaUse.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    add(ref, other_chat)


def test_upload_and_remove_past_the_cap_is_refused_429(user: Any, chat: Any, settings: Any) -> None:
    # given a user who adds a file and removes it at once, through the composer's doors
    settings.AGENT = {**settings.AGENT, "UPLOADS_PER_MINUTE": 3}
    client, token = csrf_client(user)
    answers = []
    for number in range(4):
        response = post_file(client, token, chat, f"{number}.txt", b"x" * 10)
        answers.append(response.status_code)
        if response.status_code == 201:
            removed = client.post(
                reverse("agent:attachment_remove", args=[response.json()["attachment"]["id"]]), HTTP_X_CSRFTOKEN=token
            )
            assert removed.status_code == 200
    # then the removed files still counted: the fourth upload is refused
    assert answers == [201, 201, 201, 429]
    assert not Attachment.objects.exists()


def test_a_file_that_would_pass_the_stored_bytes_is_refused_with_the_sizes(
    ref: SessionRef, chat: Any, settings: Any, storage_root: Path
) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_STORED_BYTES_PER_USER": 100}
    add(ref, chat, data=b"x" * 60)
    with pytest.raises(StorageFull) as refused:
        add(ref, chat, data=b"x" * 41)
    params = refused.value.params
    assert (refused.value.code, refused.value.http_status) == ("storage_full", 413)
    assert (params["limit"], params["cap"], params["used"], params["size"]) == ("stored_bytes", 100, 60, 41)
    assert "100\xa0bytes" in params["message"]
    assert Attachment.objects.count() == 1 and len(stored_files(storage_root)) == 1
    add(ref, chat, data=b"x" * 40)  # what fits still goes in


def test_files_of_every_chat_count_until_removed(ref: SessionRef, chat: Any, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_STORED_BYTES_PER_USER": 100}
    other_chat = conversations.create_conversation(ref, {}, impersonated=False)
    first = add(ref, other_chat, data=b"x" * 80)
    with pytest.raises(StorageFull):
        add(ref, chat, data=b"x" * 30)
    from agent.attachments.api import remove_attachment

    remove_attachment(ref, first.pk, impersonated=False)
    add(ref, chat, data=b"x" * 30)


def test_zero_is_no_cap(ref: SessionRef, chat: Any, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "UPLOADS_PER_MINUTE": 0, "MAX_STORED_BYTES_PER_USER": 0}
    for number in range(8):
        add(ref, conversations.create_conversation(ref, {}, impersonated=False), f"{number}.txt", b"x" * 1000)
    assert Attachment.objects.count() == 8


def test_the_upload_api_answers_413_storage_full_with_the_message(user: Any, chat: Any, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_STORED_BYTES_PER_USER": 50}
    client, token = csrf_client(user)
    response = post_file(client, token, chat, "big.txt", b"x" * 51)
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "storage_full" and "does not fit" in body["message"]
    assert body["limit"]["cap"] == 50 and body["limit"]["used"] == 0


def test_the_upload_api_answers_429_too_many_uploads(user: Any, chat: Any, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "UPLOADS_PER_MINUTE": 1}
    client, token = csrf_client(user)
    assert post_file(client, token, chat, "a.txt", b"a").status_code == 201
    response = post_file(client, token, chat, "b.txt", b"b")
    assert response.status_code == 429 and response.json()["error"] == "too_many_uploads"
    assert "the most allowed is 1" in response.json()["message"]


@pytest.mark.django_db(transaction=True)
def test_uploads_at_once_never_pass_the_stored_bytes(ref: SessionRef, settings: Any, storage_root: Path) -> None:
    # given: room for three 100-byte files and six uploads released together, each into a chat of its own
    settings.AGENT = {**settings.AGENT, "MAX_STORED_BYTES_PER_USER": 300}
    chats = [conversations.create_conversation(ref, {}, impersonated=False) for _ in range(6)]
    outcomes = at_once(*[lambda c=c: add(ref, c, data=b"x" * 100) for c in chats])
    # then: three passed, the rest were refused, and only what passed is stored
    assert [kind for kind, _value in outcomes].count("ok") == 3
    assert all(isinstance(value, StorageFull) for kind, value in outcomes if kind == "error")
    assert len(stored_files(storage_root)) == 3
