"""Upload, list, remove and serve over HTTP; life cycle of stored files; the admin's files per chat."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent import attachments
from agent.access import SessionRef
from agent.conversations import append_message, create_conversation, delete_conversation
from agent.core import events
from agent.models import Attachment, Conversation
from agent.retention import purge
from agent.tasks import purge_attachments, sweep_turns
from tests.support.factories import UserFactory
from tests.support.files import picture_bytes, post_file, ready, stored_files, upload
from tests.support.layer import Listener
from tests.support.sessions import csrf_client, grant, login
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def queued(monkeypatch: Any) -> list[str]:
    sent: list[str] = []
    monkeypatch.setattr("agent.attachments.api.current_app.send_task", lambda name, args, **options: sent.extend(args))
    return sent


# -- upload, list, remove -------------------------------------------------------------------


def test_an_upload_answers_what_a_client_sees(
    user: Any, chat: Any, queued: list[str], django_capture_on_commit_callbacks: Any
) -> None:
    client, token = csrf_client(user)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_file(client, token, chat, "notes.txt", b"hello")
    assert response.status_code == 201
    view = response.json()["attachment"]
    assert (view["name"], view["status"], view["size"]) == ("notes.txt", "pending", 5)
    assert queued == [view["id"]]


def test_an_upload_without_the_csrf_token_is_refused(user: Any, chat: Any) -> None:
    client, _token = csrf_client(user)
    response = client.post(reverse("agent:attachment_upload", args=[chat.pk]), {"file": upload("a.txt", b"x")})
    assert response.status_code == 403 and not Attachment.objects.exists()


def test_a_body_declared_too_large_is_refused_413_before_it_is_read(user: Any, chat: Any) -> None:
    client, token = csrf_client(user)
    with agent_conf(MAX_FILE_BYTES=100):
        response = client.generic(
            "POST",
            reverse("agent:attachment_upload", args=[chat.pk]),
            b"x" * 10,
            content_type="multipart/form-data; boundary=zz",
            HTTP_X_CSRFTOKEN=token,
            CONTENT_LENGTH=str(100 + 64 * 1024 + 1),
        )
    assert response.status_code == 413 and response.json()["error"] == "file_too_large"


def test_a_file_past_the_limit_is_refused_413_while_it_streams(user: Any, chat: Any, storage_root: Path) -> None:
    client, token = csrf_client(user)
    with agent_conf(MAX_FILE_BYTES=1000):
        response = post_file(client, token, chat, "big.txt", b"x" * 5000)
    assert response.status_code == 413 and response.json()["error"] == "file_too_large"
    assert not Attachment.objects.exists() and stored_files(storage_root) == []


@pytest.mark.parametrize(
    ("name", "data", "status", "code"),
    [
        ("evil.exe", b"MZ", 415, "unsupported_type"),
        ("fake.png", b"<html><script>alert(1)</script>", 415, "unsupported_type"),
    ],
)
def test_a_refused_type_answers_its_code(user: Any, chat: Any, name: str, data: bytes, status: int, code: str) -> None:
    client, token = csrf_client(user)
    response = post_file(client, token, chat, name, data)
    assert response.status_code == status and response.json()["error"] == code


def test_a_sixth_file_answers_too_many_files(user: Any, chat: Any) -> None:
    client, token = csrf_client(user)
    for n in range(5):
        assert post_file(client, token, chat, f"{n}.txt", b"x").status_code == 201
    response = post_file(client, token, chat, "6.txt", b"x")
    assert response.status_code == 409 and response.json()["error"] == "too_many_files"


def test_someone_elses_chat_is_not_found_and_a_signed_out_user_is_401(user: Any, chat: Any, make_user: Any) -> None:
    stranger, token = csrf_client(make_user())
    assert post_file(stranger, token, chat, "a.txt", b"x").status_code == 404
    anonymous = Client()
    response = anonymous.get(reverse("agent:attachment_list", args=[chat.pk]))
    assert response.status_code == 401 and response.json()["error"] == "session_gone"


def test_the_composer_lists_and_removes_files(
    session: Any, chat: Any, storage_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    client, ref = session
    first = attachments.add_attachment(ref, chat.pk, upload("a.txt", b"x"), impersonated=False)
    listed = client.get(reverse("agent:attachment_list", args=[chat.pk])).json()["attachments"]
    assert [a["id"] for a in listed] == [str(first.pk)] and "text" not in listed[0]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("agent:attachment_remove", args=[first.pk]))
    assert response.status_code == 200 and stored_files(storage_root) == []
    assert client.post(reverse("agent:attachment_remove", args=[first.pk])).status_code == 404


# -- serving ---------------------------------------------------------------------------------


def test_a_ready_picture_is_served_inline_to_its_owner_only(session: Any, chat: Any, make_user: Any) -> None:
    client, ref = session
    data = picture_bytes("PNG")
    photo = ready(attachments.add_attachment(ref, chat.pk, upload("cat.png", data), impersonated=False))
    url = reverse("agent:attachment_file", args=[photo.pk])
    response = client.get(url)
    assert response.status_code == 200 and b"".join(response.streaming_content) == data
    assert response["Content-Type"] == "image/png"
    assert response["Content-Disposition"].startswith("inline") and "cat.png" in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"] and "private" in response["Cache-Control"]
    stranger, _ = login(make_user())
    assert stranger.get(url).status_code == 404
    assert Client().get(url).status_code == 401


def test_a_text_file_is_served_as_a_download(session: Any, chat: Any) -> None:
    client, ref = session
    doc = ready(attachments.add_attachment(ref, chat.pk, upload("page.md", b"<script>x</script>"), impersonated=False))
    response = client.get(reverse("agent:attachment_file", args=[doc.pk]))
    assert response["Content-Disposition"].startswith("attachment")
    assert response["Content-Type"] == "text/markdown; charset=utf-8"


def test_a_pending_or_failed_file_or_one_of_a_deleted_chat_is_not_served(session: Any, chat: Any) -> None:
    client, ref = session
    pending = attachments.add_attachment(ref, chat.pk, upload("a.txt", b"x"), impersonated=False)
    failed = attachments.add_attachment(ref, chat.pk, upload("b.txt", b"x"), impersonated=False)
    Attachment.objects.filter(pk=failed.pk).update(status="failed", error_code="unreadable")
    other = create_conversation(ref, {}, impersonated=False)
    gone = ready(attachments.add_attachment(ref, other.pk, upload("c.txt", b"x"), impersonated=False))
    delete_conversation(ref, other.pk, impersonated=False)
    for row in (pending, failed, gone):
        assert client.get(reverse("agent:attachment_file", args=[row.pk])).status_code == 404


def test_serving_runs_the_ladder(session: Any, chat: Any, user: Any) -> None:
    client, ref = session
    photo = ready(attachments.add_attachment(ref, chat.pk, upload("cat.png", picture_bytes()), impersonated=False))
    user.user_permissions.remove(Permission.objects.get(codename="use_agent"))
    response = client.get(reverse("agent:attachment_file", args=[photo.pk]))
    assert response.status_code == 403 and response.json()["error"] == "forbidden"


# -- life cycle -----------------------------------------------------------------------------


def test_purging_a_chat_removes_its_stored_files(
    ref: SessionRef, chat: Any, storage_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    message = append_message(chat.pk, role="user", content="x")
    sent = attachments.add_attachment(ref, chat.pk, upload("a.txt", b"x"), impersonated=False)
    Attachment.objects.filter(pk=sent.pk).update(message=message)
    attachments.add_attachment(ref, chat.pk, upload("b.txt", b"x"), impersonated=False)
    delete_conversation(ref, chat.pk, impersonated=False)
    Conversation.objects.filter(pk=chat.pk).update(updated_at=timezone.now() - timedelta(days=31))
    with django_capture_on_commit_callbacks(execute=True):
        assert purge() == 1
    assert not Attachment.objects.exists() and stored_files(storage_root) == []


def test_deleting_a_user_removes_their_stored_files(
    ref: SessionRef, chat: Any, user: Any, storage_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    attachments.add_attachment(ref, chat.pk, upload("a.txt", b"x"), impersonated=False)
    with django_capture_on_commit_callbacks(execute=True):
        user.delete()
    assert stored_files(storage_root) == []


def test_a_rolled_back_delete_keeps_the_file(
    ref: SessionRef, chat: Any, storage_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    from django.db import transaction

    row = attachments.add_attachment(ref, chat.pk, upload("a.txt", b"x"), impersonated=False)
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            Attachment.objects.get(pk=row.pk).delete()
            raise RuntimeError
    assert len(stored_files(storage_root)) == 1


def test_the_nightly_task_removes_only_unlinked_files_older_than_a_day(
    ref: SessionRef, chat: Any, storage_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    old, fresh, sent = (
        attachments.add_attachment(ref, chat.pk, upload(f"{n}.txt", b"x"), impersonated=False) for n in range(3)
    )
    Attachment.objects.filter(pk__in=[old.pk, sent.pk]).update(created_at=timezone.now() - timedelta(hours=25))
    Attachment.objects.filter(pk=sent.pk).update(message=append_message(chat.pk, role="user", content="x"))
    with django_capture_on_commit_callbacks(execute=True):
        assert purge_attachments() == 1
    assert set(Attachment.objects.values_list("pk", flat=True)) == {fresh.pk, sent.pk}
    assert len(stored_files(storage_root)) == 2
    assert purge_attachments.name == "agent.purge_attachments"


def test_the_sweep_fails_files_still_pending_long_after_any_reading_could_take(
    ref: SessionRef, chat: Any, django_capture_on_commit_callbacks: Any
) -> None:
    stalled, waiting, read = (
        attachments.add_attachment(ref, chat.pk, upload(f"{n}.txt", b"x"), impersonated=False) for n in range(3)
    )
    long_ago = timezone.now() - timedelta(seconds=10 * 30 + 1)  # ten EXTRACTION_TIMEOUT_S
    Attachment.objects.filter(pk__in=[stalled.pk, read.pk]).update(created_at=long_ago)
    ready(read)
    listener = Listener()
    listener.join(events.topic(chat.pk))
    with django_capture_on_commit_callbacks(execute=True):
        sweep_turns()
    states = dict(Attachment.objects.values_list("pk", "status"))
    assert states == {stalled.pk: "failed", waiting.pk: "pending", read.pk: "ready"}
    assert Attachment.objects.get(pk=stalled.pk).error_code == "extraction_timeout"
    told = listener.receive(timeout=5)
    assert told is not None and (told["type"], told["attachment"]) == (events.ATTACHMENT_PROCESSED, str(stalled.pk))


# -- the admin ---------------------------------------------------------------------------------


def test_staff_see_a_chats_files_but_their_names_and_text_only_with_view_chat_content(
    ref: SessionRef, chat: Any
) -> None:
    ready(
        attachments.add_attachment(ref, chat.pk, upload("plans.txt", b"x"), impersonated=False),
        text="the secret plans 4242",
    )
    staff = grant(UserFactory(is_staff=True), "agent.manage_agent")
    client = Client()
    client.force_login(staff)
    page = client.get(reverse("admin:agent_conversation_change", args=[chat.pk])).content.decode()
    assert "text/plain" in page and "plans.txt" not in page and "4242" not in page
    grant(staff, "agent.view_chat_content")
    page = client.get(reverse("admin:agent_conversation_change", args=[chat.pk])).content.decode()
    assert "plans.txt" in page and "the secret plans 4242" in page
