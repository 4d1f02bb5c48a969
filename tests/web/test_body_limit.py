"""The request-body limit in front of Django, through the test site's real ASGI app (``tests.asgi``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.urls import reverse

from agent.web.body_limit import FORM_MARGIN_BYTES, max_request_bytes
from tests.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]


def http_post(*headers: tuple[bytes, bytes], path: str | None = None) -> ApplicationCommunicator:
    path = path or reverse("agent:attachment_upload", args=[uuid.uuid4()])
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    return ApplicationCommunicator(application, scope)


async def response_of(app: ApplicationCommunicator) -> tuple[int, dict[str, Any]]:
    start = await app.receive_output(timeout=5)
    assert start["type"] == "http.response.start"
    body = await app.receive_output(timeout=5)
    return start["status"], json.loads(body["body"] or b"{}")


async def refused_as(app: ApplicationCommunicator) -> tuple[int, str]:
    """The status and the code of a refusal, whose body also says why in words."""
    status, body = await response_of(app)
    assert body["message"] == "This is too much to send at once."
    return status, body["error"]


@pytest.mark.asyncio
async def test_a_2_gb_declared_body_is_answered_413_at_once_without_a_byte_of_it_sent() -> None:
    # given: a logged-out client that declares 2 GB and sends nothing after the headers
    app = http_post((b"content-length", str(2 * 1024**3).encode()), (b"content-type", b"multipart/form-data; b=z"))
    # then: the answer comes without the app ever asking for the body
    assert await refused_as(app) == (413, "too_large")
    await app.wait(timeout=5)


@pytest.mark.asyncio
async def test_a_chunked_body_is_cut_off_413_as_soon_as_it_passes_the_limit(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_REQUEST_BYTES": 100_000}
    app = http_post((b"content-type", b"multipart/form-data; boundary=z"), (b"transfer-encoding", b"chunked"))
    for _ in range(2):
        await app.send_input({"type": "http.request", "body": b"x" * 64 * 1024, "more_body": True})
    assert await refused_as(app) == (413, "too_large")
    await app.wait(timeout=5)


@pytest.mark.asyncio
async def test_a_body_within_the_limit_reaches_django() -> None:
    create = reverse("agent:conversation_create")
    app = http_post((b"content-type", b"application/json"), (b"content-length", b"2"), path=create)
    await app.send_input({"type": "http.request", "body": b"{}", "more_body": False})
    status, _body = await response_of(app)
    assert status not in (413, 500)
    await app.wait(timeout=5)


def test_the_default_limit_is_the_largest_file_or_recording_with_room_for_its_form(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_FILE_BYTES": 20 * 1024 * 1024, "MAX_VOICE_BYTES": 10 * 1024 * 1024}
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
    assert max_request_bytes() == 20 * 1024 * 1024 + FORM_MARGIN_BYTES
    settings.AGENT = {**settings.AGENT, "MAX_VOICE_BYTES": 30 * 1024 * 1024}
    assert max_request_bytes() == 30 * 1024 * 1024 + FORM_MARGIN_BYTES
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 50 * 1024 * 1024
    assert max_request_bytes() == 50 * 1024 * 1024
