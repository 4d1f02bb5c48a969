"""Files on two hosts that share no folder: stored in S3, read by the other host's worker, served by either.

Host A's daphne takes the uploads and queues their reading for host B's
worker; host B's daphne starts the turn, which host A's worker runs with the
files B's worker read; host B's daphne serves them (whole, a range, and 404
for an object gone from the bucket); removing a file and purging the chat
delete their objects. Neither host's folder ever holds a file. It runs on one
Redis, and again with the channel layer and the broker behind Sentinel.
"""

from __future__ import annotations

import base64
import json
import secrets
import urllib.error
import urllib.request
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from agent.access import SessionRef
from agent.conversations import delete_conversation
from agent.models import Attachment, Conversation, Endpoint
from tests.support.files import pdf_bytes, picture_bytes
from tests.support.harness import Tab
from tests.support.hosts import BUCKET, SENTINEL_BROKER_DB, Host, S3Server
from tests.support.model_server import ScriptedModelServer, answer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.hosts, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]

BIG_TEXT = b"".join(b"line %06d of a long file\n" % n for n in range(12_000))  # about 300 KB: several chunks


class Browser:
    """A signed-in browser's HTTP calls to one host's daphne (session cookie, CSRF token and Origin)."""

    def __init__(self, host: Host, session_key: str) -> None:
        self.base_url = host.stack.base_url
        self.token = secrets.token_hex(16)
        self.cookie = f"{settings.SESSION_COOKIE_NAME}={session_key}; {settings.CSRF_COOKIE_NAME}={self.token}"
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(
        self, path: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, bytes]:
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method="POST" if data is not None else "GET",
            headers={"Cookie": self.cookie, "X-CSRFToken": self.token, "Origin": self.base_url, **(headers or {})},
        )
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.headers, refused.read()

    def upload(self, chat: Any, name: str, content: bytes) -> str:
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + content
            + f"\r\n--{boundary}--\r\n".encode()
        )
        status, _headers, answered = self.call(
            f"/assistant/api/conversations/{chat.pk}/attachments/upload/",
            data=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert status == 201, answered
        return str(json.loads(answered)["attachment"]["id"])

    def download(self, attachment_id: str, **headers: str) -> tuple[int, Any, bytes]:
        return self.call(f"/assistant/api/attachments/{attachment_id}/file/", headers=headers)


def statuses(ids: list[str]) -> dict[str, str]:
    return {str(pk): status for pk, status in Attachment.objects.filter(pk__in=ids).values_list("pk", "status")}


def ran(host: Host, task: str) -> int:
    """How many tasks of that name the host's worker received."""
    return sum(1 for line in host.log("worker").splitlines() if f"Task {task}[" in line and "] received" in line)


def object_bytes(s3: S3Server, key: str) -> bytes:
    return s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_files_uploaded_on_one_host_are_read_served_and_deleted_on_the_other(
    hosts: tuple[Host, Host],
    s3: S3Server,
    ref: SessionRef,
    chat: Any,
    endpoint: Endpoint,
    model_server: ScriptedModelServer,
) -> None:
    host_a, host_b = hosts
    endpoint.supports_images, endpoint.timeout_s = True, 30
    endpoint.save()
    on_a, on_b = Browser(host_a, ref.session_key), Browser(host_b, ref.session_key)

    # given: five files uploaded through host A's daphne
    photo = on_a.upload(chat, "photo.png", picture_bytes("PNG", size=(2000, 1000)))
    report = on_a.upload(chat, "report.pdf", pdf_bytes(["quarterly figures are up"]))
    big = on_a.upload(chat, "big.txt", BIG_TEXT)
    lost = on_a.upload(chat, "lost.txt", b"an object the bucket loses")
    spare = on_a.upload(chat, "spare.txt", b"removed before it is sent")
    ids = [photo, report, big, lost, spare]

    # when: host B's worker reads them (host A's tasks go to host B's queue)
    wait_until(
        lambda: set(statuses(ids).values()) == {"ready"},
        60,
        "every file read",
        every=0.2,
        why=lambda: f"{statuses(ids)}; worker B:\n{host_b.log('worker')[-2000:]}",
    )

    # then: each is in the bucket, the picture re-encoded in place of the upload, and read from there
    rows = {str(row.pk): row for row in Attachment.objects.filter(pk__in=ids)}
    assert s3.keys() == sorted(row.file.name for row in rows.values())
    assert rows[photo].file.name.endswith(".png") and rows[photo].size == len(object_bytes(s3, rows[photo].file.name))
    assert rows[report].text == "quarterly figures are up" and rows[big].text.startswith("line 000000 of")
    assert ran(host_b, "agent.process_attachment") == 5 and ran(host_a, "agent.process_attachment") == 0

    # when: a turn with the picture and the PDF is started on host B, whose tasks go to host A's worker
    model_server.push(answer("A wide red picture, and the figures are up."))
    tab = Tab(host_b.stack, ref.session_key).open()
    try:
        tab.subscribe(chat.pk)
        turn = tab.request(
            {"type": "send", "conversation": str(chat.pk), "text": "What is this?", "attachment_ids": [photo, report]}
        )["turn"]
        tab.turn_frame(turn, "ended", 60)
    finally:
        tab.close()

    # then: host A's worker read both from the bucket into the model's request
    assert ran(host_a, "agent.run_turn") == 1 and ran(host_b, "agent.run_turn") == 0
    [request] = model_server.requests
    parts = request["messages"][-1]["content"]
    assert any(p["type"] == "text" and "quarterly figures are up" in p["text"] for p in parts)
    [image] = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert base64.b64decode(image.split(",", 1)[1]) == object_bytes(s3, rows[photo].file.name)

    # when: host B's daphne serves the files
    status, headers, whole = on_b.download(big)
    assert (status, whole, headers["Content-Length"]) == (200, BIG_TEXT, str(len(BIG_TEXT)))
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Content-Disposition"].startswith("attachment")
    status, headers, part = on_b.download(big, Range="bytes=200000-200099")
    assert (status, part, headers["Content-Range"]) == (
        206,
        BIG_TEXT[200000:200100],
        f"bytes 200000-200099/{len(BIG_TEXT)}",
    )
    status, headers, _ = on_b.download(big, Range=f"bytes={len(BIG_TEXT)}-")
    assert (status, headers["Content-Range"]) == (416, f"bytes */{len(BIG_TEXT)}")
    assert on_b.download(photo)[2] == object_bytes(s3, rows[photo].file.name)

    # and: a file whose object is gone from the bucket is 404, logged by its id, not a 500
    s3.client().delete_object(Bucket=BUCKET, Key=rows[lost].file.name)
    status, _headers, answered = on_b.download(lost)
    assert (status, json.loads(answered)["error"]) == (404, "not_found")
    wait_until(lambda: lost in host_b.log("daphne"), 5, "daphne B to log the unreadable file")
    assert "lost.txt" not in host_b.log("daphne")

    # when: a file is removed through host A, then the chat is deleted and purged by host B's worker
    status, _headers, _ = on_a.call(f"/assistant/api/attachments/{spare}/remove/", data=b"")
    assert status == 200
    wait_until(lambda: rows[spare].file.name not in s3.keys(), 10, "the removed file's object deleted")
    delete_conversation(ref, chat.pk, impersonated=False)
    Conversation.objects.filter(pk=chat.pk).update(updated_at=timezone.now() - timedelta(days=31))
    host_b.send_task("agent.purge_chats")

    # then: the bucket is empty, and neither host's folder ever held a file
    wait_until(lambda: s3.keys() == [], 30, "the purged chat's objects deleted", every=0.2, why=lambda: str(s3.keys()))
    assert not Attachment.objects.exists()
    assert files_under(host_a.media_root) == [] and files_under(host_b.media_root) == []

    # and: behind Sentinel, every task went through the master's database the broker URL names
    if host_a.sentinel_set is not None:
        with redis.Redis(port=host_a.sentinel_set.master_port(), db=SENTINEL_BROKER_DB) as master:
            bound = {key.decode() for key in master.keys("_kombu.binding.*")}
        assert {f"_kombu.binding.{host_a.queue}", f"_kombu.binding.{host_b.queue}"} <= bound
