"""The files API: the ladder, the refusals, storage, the composer, the turn's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import TemporaryUploadedFile
from django.utils import translation

from agent import attachments
from agent.access import SessionRef
from agent.conversations import append_message, create_conversation, delete_conversation, message_files
from agent.core import errors
from agent.models import Attachment, Message
from tests.support.files import pdf_bytes, picture_bytes, ready, stored_files, upload, xlsx_bytes
from tests.support.sessions import login
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db


def add(ref: SessionRef, chat: Any, name: str = "notes.txt", data: bytes = b"hello", **kwargs: Any) -> Attachment:
    return attachments.add_attachment(ref, chat.pk, upload(name, data), impersonated=False, **kwargs)


def code_of(error: ValidationError) -> str:
    return error.code  # type: ignore[attr-defined]


# -- the ladder ---------------------------------------------------------------------------


def test_add_requires_the_impersonated_flag(ref: SessionRef, chat: Any) -> None:
    with pytest.raises(TypeError):
        attachments.add_attachment(ref, chat.pk, upload("a.txt", b"a"))  # type: ignore[call-arg]


def test_an_impersonating_operator_adds_nothing(ref: SessionRef, chat: Any, storage_root: Path) -> None:
    with pytest.raises(errors.Impersonated):
        attachments.add_attachment(ref, chat.pk, upload("a.txt", b"a"), impersonated=True)
    assert not Attachment.objects.exists() and stored_files(storage_root) == []


def test_someone_elses_chat_a_deleted_one_and_a_malformed_id_are_all_not_found(
    ref: SessionRef, chat: Any, make_user: Any
) -> None:
    _client, other = login(make_user())
    theirs = create_conversation(other, {}, impersonated=False)
    gone = create_conversation(ref, {}, impersonated=False)
    delete_conversation(ref, gone.pk, impersonated=False)
    for conversation_id in (theirs.pk, gone.pk, "not-a-uuid"):
        with pytest.raises(errors.NotFound):
            attachments.add_attachment(ref, conversation_id, upload("a.txt", b"a"), impersonated=False)
    assert not Attachment.objects.exists()


def test_a_user_without_the_permission_is_forbidden(ref: SessionRef, chat: Any, user: Any) -> None:
    user.user_permissions.remove(Permission.objects.get(codename="use_agent"))
    with pytest.raises(errors.Forbidden):
        add(ref, chat)


def test_an_ended_session_adds_nothing(session: Any, chat: Any) -> None:
    client, ref = session
    client.logout()
    with pytest.raises(errors.SessionGone):
        add(ref, chat)


# -- what is accepted -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "content_type", "is_picture"),
    [
        ("notes.txt", "plain text, ünïcode".encode(), "text/plain", False),
        ("README.md", b"# Title\n\ntext", "text/markdown", False),
        ("table.csv", b"a,b\n1,2\n", "text/csv", False),
        ("data.json", b'  {"a": 1}', "application/json", False),
        ("report.pdf", pdf_bytes(["hello"]), "application/pdf", False),
        (
            "sheet.xlsx",
            xlsx_bytes([["a", 1]]),
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            False,
        ),
        ("photo.png", picture_bytes("PNG"), "image/png", True),
        ("photo.JPG", picture_bytes("JPEG"), "image/jpeg", True),
        ("anim.gif", picture_bytes("GIF"), "image/gif", True),
        ("photo.webp", picture_bytes("WEBP"), "image/webp", True),
    ],
)
def test_each_accepted_type_is_stored_pending(
    ref: SessionRef, chat: Any, storage_root: Path, name: str, data: bytes, content_type: str, is_picture: bool
) -> None:
    attachment = add(ref, chat, name, data)
    row = Attachment.objects.get(pk=attachment.pk)
    assert (row.content_type, row.is_picture, row.status, row.size) == (content_type, is_picture, "pending", len(data))
    assert row.message_id is None and row.text == ""
    [stored] = stored_files(storage_root)
    assert stored.read_bytes() == data
    assert name not in str(stored)  # kept under its uuid, never under the name the browser sent


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("program.exe", b"MZ\x90\x00"),
        ("report.pdf", b"just some text, not a PDF"),
        ("photo.png", picture_bytes("JPEG")),  # the content and the name disagree
        ("notes.txt", picture_bytes("PNG")),
        ("notes.txt", b"text with a \x00 NUL byte"),
        ("data.json", b"not json at all"),
        ("sheet.xlsx", b"a,b\n1,2\n"),
        ("letter.docx", b"PK\x03\x04rest"),
        ("no_extension", b"hello"),
    ],
)
def test_a_type_is_decided_by_content_and_name_together(
    ref: SessionRef, chat: Any, storage_root: Path, name: str, data: bytes
) -> None:
    with pytest.raises(ValidationError) as refused:
        add(ref, chat, name, data)
    assert code_of(refused.value) == "unsupported_type"
    assert refused.value.error_dict["file"][0].code == "unsupported_type"
    assert not Attachment.objects.exists() and stored_files(storage_root) == []


def test_a_site_can_narrow_the_accepted_types(ref: SessionRef, chat: Any) -> None:
    with agent_conf(ACCEPTED_TYPES=["text/plain"]):
        add(ref, chat, "a.txt", b"fine")
        with pytest.raises(ValidationError) as refused:
            add(ref, chat, "b.png", picture_bytes("PNG"))
    assert code_of(refused.value) == "unsupported_type"


def test_a_file_over_the_limit_is_too_large(ref: SessionRef, chat: Any, storage_root: Path) -> None:
    with agent_conf(MAX_FILE_BYTES=10):
        add(ref, chat, "ten.txt", b"0123456789")
        with pytest.raises(ValidationError) as refused:
            add(ref, chat, "eleven.txt", b"0123456789A")
    assert code_of(refused.value) == "file_too_large"
    assert len(stored_files(storage_root)) == 1


def test_the_composer_holds_at_most_five_files(ref: SessionRef, chat: Any, storage_root: Path) -> None:
    for number in range(5):
        add(ref, chat, f"{number}.txt")
    with pytest.raises(ValidationError) as refused:
        add(ref, chat, "six.txt")
    assert code_of(refused.value) == "too_many_files"
    assert Attachment.objects.count() == 5 and len(stored_files(storage_root)) == 5


def test_files_already_sent_do_not_count_against_the_composer(ref: SessionRef, chat: Any) -> None:
    message = append_message(chat.pk, role=Message.Role.USER, content="earlier")
    for number in range(5):
        Attachment.objects.filter(pk=add(ref, chat, f"{number}.txt").pk).update(message=message)
    add(ref, chat, "sixth.txt")


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("../../etc/passwd.txt", "passwd.txt"),
        ("C:\\Users\\me\\Desktop\\plan.md", "plan.md"),
        ("/abs/path/x.csv", "x.csv"),
        ("tab\there.txt", "tabhere.txt"),
        ("a" * 300 + ".txt", "a" * 251 + ".txt"),
    ],
)
def test_names_are_cut_to_their_base_name(ref: SessionRef, chat: Any, sent: str, kept: str) -> None:
    assert add(ref, chat, sent).name == kept


def test_a_large_upload_is_moved_to_storage_not_read_whole(ref: SessionRef, chat: Any, storage_root: Path) -> None:
    # given: what Django's parser hands over for a large upload, a temporary file on disk
    uploaded = TemporaryUploadedFile("big.txt", "text/plain", 0, "utf-8")
    block = b"x" * 65536
    for _ in range(64):
        uploaded.write(block)
    uploaded.size = 64 * len(block)
    uploaded.seek(0)
    reads: list[int] = []
    real_read = uploaded.file.read

    def counting_read(size: int = -1) -> bytes:
        reads.append(size)
        return real_read(size)

    uploaded.file.read = counting_read  # type: ignore[method-assign]
    # when
    attachment = attachments.add_attachment(ref, chat.pk, uploaded, impersonated=False)
    # then: only the head was read here; storage moved or copied it in chunks
    assert -1 not in reads and all(0 < size <= 65536 for size in reads)
    assert attachment.size == 64 * len(block)
    assert stored_files(storage_root)[0].stat().st_size == 64 * len(block)
    uploaded.close()


def test_processing_is_queued_on_commit(
    ref: SessionRef, chat: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    sent: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(
        "agent.attachments.api.current_app.send_task", lambda name, args, **_: sent.append((name, args))
    )
    with django_capture_on_commit_callbacks(execute=True):
        attachment = add(ref, chat)
    assert sent == [("agent.process_attachment", [str(attachment.pk)])]


# -- remove, list, what a client sees ----------------------------------------------------------


def test_remove_deletes_the_row_and_the_stored_file(
    ref: SessionRef, chat: Any, storage_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    attachment = add(ref, chat)
    with django_capture_on_commit_callbacks(execute=True):
        attachments.remove_attachment(ref, attachment.pk, impersonated=False)
    assert not Attachment.objects.exists() and stored_files(storage_root) == []


def test_remove_refuses_a_sent_file_and_someone_elses(ref: SessionRef, chat: Any, make_user: Any) -> None:
    sent = add(ref, chat, "sent.txt")
    Attachment.objects.filter(pk=sent.pk).update(message=append_message(chat.pk, role="user", content="x"))
    _client, other = login(make_user())
    mine = add(ref, chat, "mine.txt")
    for who, pk in ((ref, sent.pk), (other, mine.pk), (ref, "bad-id")):
        with pytest.raises(errors.NotFound):
            attachments.remove_attachment(who, pk, impersonated=False)
    assert Attachment.objects.count() == 2
    with pytest.raises(errors.Impersonated):
        attachments.remove_attachment(ref, mine.pk, impersonated=True)


def test_list_unlinked_is_the_composer_oldest_first(ref: SessionRef, chat: Any) -> None:
    first, second = add(ref, chat, "1.txt"), add(ref, chat, "2.txt")
    sent = add(ref, chat, "3.txt")
    Attachment.objects.filter(pk=sent.pk).update(message=append_message(chat.pk, role="user", content="x"))
    other_chat = create_conversation(ref, {}, impersonated=False)
    add(ref, other_chat, "elsewhere.txt")
    listed = attachments.list_unlinked(ref, chat.pk, impersonated=False)
    assert [a.pk for a in listed] == [first.pk, second.pk]


def test_a_client_never_sees_the_text(ref: SessionRef, chat: Any) -> None:
    attachment = ready(add(ref, chat), text="secret extracted text")
    view = attachments.client_view(attachment)
    assert view == {
        "id": str(attachment.pk),
        "name": "notes.txt",
        "size": 5,
        "content_type": "text/plain",
        "status": "ready",
        "error_code": None,
        "error_message": None,
        "is_picture": False,
    }
    assert "secret" not in str(view)


def test_a_file_that_could_not_be_read_says_why_in_the_active_language(ref: SessionRef, chat: Any) -> None:
    attachment = add(ref, chat)
    Attachment.objects.filter(pk=attachment.pk).update(status=Attachment.Status.FAILED, error_code="pdf_encrypted")
    attachment.refresh_from_db()
    assert attachments.client_view(attachment)["error_message"] == "The PDF is protected by a password."
    with translation.override("ru"):
        in_russian = attachments.client_view(attachment)["error_message"]
    assert in_russian and in_russian != "The PDF is protected by a password."


# -- the turn's files ------------------------------------------------------------


def test_for_turn_takes_ready_unlinked_files_of_this_chat_and_user_in_order(
    ref: SessionRef, chat: Any, user: Any
) -> None:
    scope = _scope(ref)
    one, two = ready(add(ref, chat, "1.txt")), ready(add(ref, chat, "2.txt"))
    assert [a.pk for a in attachments.for_turn(scope, chat, [str(two.pk), one.pk])] == [two.pk, one.pk]
    assert attachments.for_turn(scope, chat, []) == []


def test_for_turn_refuses_every_other_file_as_not_found(ref: SessionRef, chat: Any, make_user: Any) -> None:
    scope = _scope(ref)
    pending = add(ref, chat, "pending.txt")
    failed = add(ref, chat, "failed.txt")
    Attachment.objects.filter(pk=failed.pk).update(status="failed", error_code="unreadable")
    sent = ready(add(ref, chat, "sent.txt"))
    Attachment.objects.filter(pk=sent.pk).update(message=append_message(chat.pk, role="user", content="x"))
    elsewhere = ready(add(ref, create_conversation(ref, {}, impersonated=False), "elsewhere.txt"))
    _client, other = login(make_user())
    theirs = ready(add(other, create_conversation(other, {}, impersonated=False), "theirs.txt"))
    for pk in (pending.pk, failed.pk, sent.pk, elsewhere.pk, theirs.pk, "nonsense"):
        with pytest.raises(errors.NotFound):
            attachments.for_turn(scope, chat, [pk])


def test_for_turn_refuses_more_than_five(ref: SessionRef, chat: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        attachments.for_turn(_scope(ref), chat, [f"00000000-0000-0000-0000-00000000000{n}" for n in range(6)])
    assert code_of(refused.value) == "too_many_files" and "attachment_ids" in refused.value.error_dict


def test_link_puts_the_turns_files_on_the_message_and_skips_removed_ones(ref: SessionRef, chat: Any) -> None:
    one, two = ready(add(ref, chat, "1.txt")), ready(add(ref, chat, "2.txt"))
    turn = _TurnLike(chat, ref.user_id, [str(two.pk), str(one.pk)])
    attachments.remove_attachment(ref, one.pk, impersonated=False)
    message = append_message(chat.pk, role="user", content="with files")
    linked = attachments.link(turn, message)
    assert [a.pk for a in linked] == [two.pk]
    assert Attachment.objects.get(pk=two.pk).message_id == message.pk
    assert attachments.list_unlinked(ref, chat.pk, impersonated=False) == []


def test_message_files_are_the_chips_of_each_message(ref: SessionRef, chat: Any) -> None:
    message = append_message(chat.pk, role="user", content="with files")
    one = ready(add(ref, chat, "1.txt"), text="hidden")
    Attachment.objects.filter(pk=one.pk).update(message=message)
    assert message_files([message.pk]) == {
        str(message.pk): [attachments.client_view(Attachment.objects.get(pk=one.pk))]
    }


class _TurnLike:
    def __init__(self, chat: Any, user_id: int, attachment_ids: list[str]) -> None:
        self.conversation_id, self.user_id, self.attachment_ids = chat.pk, user_id, attachment_ids


def _scope(ref: SessionRef) -> Any:
    from agent.access import authorize_session

    return authorize_session(ref, impersonated=False)
