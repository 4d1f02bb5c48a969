"""Files through any storage: downloads streamed in chunks, one byte range on request, and a storage that
fails (a lost object, an outage) answered with 404 or ``unreadable`` and logged by ids, never a 500."""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from agent import attachments
from agent.attachments.downloads import StoredFileResponse, Window, requested_range
from agent.models import Attachment
from agent.tasks import process_attachment
from tests.support.files import pdf_bytes, ready, stored_files, upload
from tests.support.sessions import login
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db

DATA = b"".join(b"%03d," % n for n in range(256))  # 1,024 bytes of text


@pytest.fixture(autouse=True)
def queued(monkeypatch: Any) -> None:
    monkeypatch.setattr("agent.attachments.api.current_app.send_task", lambda name, args: None)


@pytest.fixture
def doc(ref: Any, chat: Any) -> Attachment:
    return ready(attachments.add_attachment(ref, chat.pk, upload("data.csv", DATA), impersonated=False))


def get(client: Any, row: Attachment, **headers: str) -> Any:
    return client.get(reverse("agent:attachment_file", args=[row.pk]), headers=headers)


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def use_storage(settings: Any, backend: str) -> Any:
    """Attachments in an alias of their own, as a site with AGENT["ATTACHMENT_STORAGE"] has them."""
    settings.STORAGES = {**settings.STORAGES, "agent_files": {"BACKEND": backend}}
    return agent_conf(ATTACHMENT_STORAGE="agent_files")


# -- ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-9", (0, 9)),
        ("bytes=1000-", (1000, 1023)),
        ("bytes=-24", (1000, 1023)),
        ("bytes=-5000", (0, 1023)),
        ("bytes=10-99999", (10, 1023)),
        (None, None),
        ("bytes=0-1,5-6", None),  # several ranges: the whole file
        ("items=0-9", None),
        ("bytes=9-1", None),
    ],
)
def test_a_range_header_is_read_as_one_range_or_the_whole_file(header: str | None, expected: Any) -> None:
    wanted = requested_range(header, 1024)
    assert (wanted.start, wanted.end) == expected if expected else wanted is None


def test_the_whole_file_says_its_length_and_that_ranges_are_served(session: Any, doc: Attachment) -> None:
    response = get(session[0], doc)
    assert response.status_code == 200 and body(response) == DATA
    assert response["Content-Length"] == "1024" and response["Accept-Ranges"] == "bytes"


def test_a_range_is_answered_206_with_its_bytes(session: Any, doc: Attachment) -> None:
    response = get(session[0], doc, Range="bytes=100-199")
    assert response.status_code == 206 and body(response) == DATA[100:200]
    assert response["Content-Range"] == "bytes 100-199/1024" and response["Content-Length"] == "100"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"].startswith("attachment") and "data.csv" in response["Content-Disposition"]


def test_the_last_bytes_are_answered_206(session: Any, doc: Attachment) -> None:
    response = get(session[0], doc, Range="bytes=-24")
    assert response.status_code == 206 and body(response) == DATA[-24:]
    assert response["Content-Range"] == "bytes 1000-1023/1024"


def test_a_range_past_the_end_is_416_with_the_files_length(session: Any, doc: Attachment) -> None:
    response = get(session[0], doc, Range="bytes=1024-")
    assert response.status_code == 416 and response["Content-Range"] == "bytes */1024"
    assert response["X-Content-Type-Options"] == "nosniff" and response.content == b""


def test_a_range_for_another_version_gets_the_whole_file(session: Any, doc: Attachment) -> None:
    stale = get(session[0], doc, Range="bytes=0-9", **{"If-Range": '"another"'})
    assert stale.status_code == 200 and len(body(stale)) == 1024
    same = get(session[0], doc, Range="bytes=0-9", **{"If-Range": stale["ETag"]})
    assert same.status_code == 206 and body(same) == DATA[:10]


def test_a_range_of_someone_elses_file_is_not_found(doc: Attachment, make_user: Any) -> None:
    stranger, _ = login(make_user())
    assert get(stranger, doc, Range="bytes=0-9").status_code == 404


# -- streaming ------------------------------------------------------------------------------


def test_under_asgi_the_file_is_read_a_chunk_at_a_time() -> None:
    """Django's own FileResponse reads a synchronous file whole into a list before sending a byte."""
    source = io.BytesIO(b"x" * (1024 * 1024))
    response = StoredFileResponse(Window(source, 1024 * 1024), length=1024 * 1024, content_type="text/plain")
    response.block_size = 64 * 1024  # what Django's ASGI handler sets

    async def first_chunk() -> tuple[int, int]:
        chunks = aiter(response)
        first = await anext(chunks)
        position = source.tell()
        await chunks.aclose()
        return len(first), position

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "StreamingHttpResponse must consume synchronous iterators"
        size, read_so_far = async_to_sync(first_chunk)()
    assert size == 64 * 1024 and read_so_far == 64 * 1024


# -- storages without local paths, and storages that fail -------------------------------------


def test_files_in_a_storage_without_local_paths_are_read_and_served(
    session: Any, chat: Any, settings: Any, storage_root: Path
) -> None:
    client, ref = session
    with use_storage(settings, "django.core.files.storage.InMemoryStorage"):
        row = attachments.add_attachment(
            ref, chat.pk, upload("report.pdf", pdf_bytes(["hello there"])), impersonated=False
        )
        process_attachment(str(row.pk))
        assert Attachment.objects.values_list("status", "text").get(pk=row.pk) == ("ready", "hello there")
        response = get(client, row, Range="bytes=0-4")
        assert response.status_code == 206 and body(response) == b"%PDF-"
    assert stored_files(storage_root) == []


@pytest.mark.parametrize("backend", ["UnopenableStorage", "UnreadableStorage"])
def test_a_stored_file_the_storage_cannot_read_is_404_and_logged_by_ids(
    session: Any, chat: Any, settings: Any, caplog: Any, backend: str
) -> None:
    client, ref = session
    with use_storage(settings, f"tests.attachments.storages.{backend}"):
        row = ready(attachments.add_attachment(ref, chat.pk, upload("secret-plan.txt", b"x" * 10), impersonated=False))
        with caplog.at_level(logging.WARNING, logger="agent"):
            response = get(client, row)
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert str(row.pk) in caplog.text and "StorageDown" in caplog.text
    assert "secret-plan" not in caplog.text and row.file.name not in caplog.text


def test_a_stored_file_gone_from_its_folder_is_404(session: Any, doc: Attachment, storage_root: Path) -> None:
    for path in stored_files(storage_root):
        path.unlink()
    assert get(session[0], doc).status_code == 404


@pytest.mark.parametrize("backend", ["UnopenableStorage", "UnreadableStorage"])
@pytest.mark.parametrize("name", ["report.pdf", "report.txt"])
def test_a_file_the_worker_cannot_read_fails_as_unreadable_and_is_logged(
    ref: Any, chat: Any, settings: Any, caplog: Any, backend: str, name: str
) -> None:
    data = pdf_bytes(["x"]) if name.endswith(".pdf") else b"some text"
    with use_storage(settings, f"tests.attachments.storages.{backend}"):
        row = attachments.add_attachment(ref, chat.pk, upload(name, data), impersonated=False)
        with caplog.at_level(logging.WARNING, logger="agent"):
            process_attachment(str(row.pk))
    assert Attachment.objects.values_list("status", "error_code").get(pk=row.pk) == ("failed", "unreadable")
    assert str(row.pk) in caplog.text and "report" not in caplog.text


def test_a_storage_that_fails_to_delete_leaves_the_row_deleted_and_logs_the_id(
    ref: Any, chat: Any, settings: Any, caplog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with use_storage(settings, "tests.attachments.storages.UndeletableStorage"):
        row = attachments.add_attachment(ref, chat.pk, upload("notes.txt", b"x"), impersonated=False)
        with caplog.at_level(logging.ERROR, logger="agent"), django_capture_on_commit_callbacks(execute=True):
            attachments.remove_attachment(ref, row.pk, impersonated=False)
    assert not Attachment.objects.filter(pk=row.pk).exists()
    assert str(row.pk) in caplog.text and "StorageDown" in caplog.text and "notes" not in caplog.text
