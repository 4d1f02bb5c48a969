"""Reading a file once (SPEC §9), in the task ``agent.process_attachment``.

Text kinds are decoded here, in bounded chunks: a 20 MB single-line file costs
one chunk of memory and stops at ``ATTACHMENT_TEXT_CHARS``. PDF, XLSX and
pictures go to ``parsers`` in a child process with a memory limit, killed at
``EXTRACTION_TIMEOUT_S``. The result is stored once: only a ``pending`` row is
updated, so a second delivery of the task changes nothing.
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.files import File
from django.db import transaction

from .. import events
from ..conf import PICTURE_TYPES, XLSX_TYPE, agent_settings
from ..models import Attachment
from . import parsers
from .detection import TEXT_TYPES

CHUNK_BYTES = 64 * 1024
PARSER_KINDS = {"application/pdf": "pdf", XLSX_TYPE: "xlsx", **{t: "picture" for t in PICTURE_TYPES}}
ERROR_CODES = ("pdf_encrypted", "pdf_no_text", "unreadable", "too_many_pixels", "extraction_timeout")


@dataclass(frozen=True)
class Result:
    error_code: str = ""
    text: str = ""
    complete: bool = True
    picture: str | None = None  # a re-encoded picture in the work folder
    content_type: str | None = None

    @property
    def status(self) -> str:
        return Attachment.Status.FAILED if self.error_code else Attachment.Status.READY


def process(attachment_id: Any) -> str | None:
    """Extract a pending file and store the result; its status, or None when there was nothing to do."""
    try:
        pk = uuid.UUID(str(attachment_id))
    except ValueError:
        return None
    row = Attachment.objects.filter(pk=pk, status=Attachment.Status.PENDING).defer("text").first()
    if row is None:
        return None
    with tempfile.TemporaryDirectory(prefix="agent-file-") as work:
        result = extract(row, work)
        return store(row, result)


def extract(row: Attachment, work: str) -> Result:
    if row.content_type in TEXT_TYPES:
        try:
            return read_text(row)
        except OSError:
            return Result(error_code="unreadable")
    kind = PARSER_KINDS.get(row.content_type)
    if kind is None:
        return Result(error_code="unreadable")
    try:
        source = local_path(row, work)
    except OSError:
        return Result(error_code="unreadable")
    return run_parser(kind, source, work, row.content_type)


def read_text(row: Attachment) -> Result:
    """UTF-8 with replacement, a chunk at a time, up to ``ATTACHMENT_TEXT_CHARS``."""
    limit = agent_settings.ATTACHMENT_TEXT_CHARS
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    parts: list[str] = []
    size = 0
    with row.file.storage.open(row.file.name, "rb") as handle:
        while size <= limit:
            chunk = handle.read(CHUNK_BYTES)
            text = decoder.decode(chunk, final=not chunk)
            parts.append(text[: limit + 1 - size])
            size += len(parts[-1])
            if not chunk:
                break
    text = "".join(parts)
    return Result(text=text[:limit], complete=len(text) <= limit)


def local_path(row: Attachment, work: str) -> str:
    """A path the child can open: the storage's own, or a copy made in chunks."""
    storage = row.file.storage
    try:
        return str(storage.path(row.file.name))
    except NotImplementedError:  # a remote storage
        pass
    target = os.path.join(work, "source")
    with storage.open(row.file.name, "rb") as source, open(target, "wb") as copy:
        shutil.copyfileobj(source, copy, CHUNK_BYTES)
    return target


def run_parser(kind: str, source: str, work: str, content_type: str) -> Result:
    limits = {
        "chars": agent_settings.ATTACHMENT_TEXT_CHARS,
        "pages": agent_settings.EXTRACTION_MAX_PAGES,
        "rows": agent_settings.EXTRACTION_MAX_ROWS,
        "columns": agent_settings.EXTRACTION_MAX_COLUMNS,
        "pixels": agent_settings.EXTRACTION_MAX_PIXELS,
        "unzipped_bytes": agent_settings.EXTRACTION_MAX_UNZIPPED_BYTES,
        "memory_mb": agent_settings.EXTRACTION_MEMORY_MB,
        "max_px": agent_settings.PICTURE_MAX_PX,
        "content_type": content_type,
    }
    # isolated (-I) and with no secret of the worker's environment: a parser bug exploited finds nothing
    env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
    command = [sys.executable, "-I", parsers.__file__, kind, source, work, json.dumps(limits)]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=work,
            env=env,
            timeout=agent_settings.EXTRACTION_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Result(error_code="extraction_timeout")
    try:
        answer = json.loads(done.stdout)
    except ValueError:  # killed at its memory limit, or crashed
        return Result(error_code="unreadable")
    if not answer.get("ok"):
        code = answer.get("code")
        return Result(error_code=code if code in ERROR_CODES else "unreadable")
    picture = answer.get("picture")
    if picture is not None and os.path.dirname(os.path.realpath(picture)) != os.path.realpath(work):
        return Result(error_code="unreadable")
    return Result(
        text=str(answer.get("text") or ""),
        complete=bool(answer.get("complete")),
        picture=picture,
        content_type=answer.get("content_type"),
    )


def store(row: Attachment, result: Result) -> str | None:
    """Store the result on a still-pending row and tell the chat's tabs after commit."""
    storage = row.file.storage
    old_name = row.file.name
    fields: dict[str, Any] = {
        "status": result.status,
        "error_code": result.error_code,
        "text": clean_text(result.text),
        "text_complete": result.complete,
    }
    new_name = None
    if result.picture and not result.error_code:
        extension = os.path.splitext(result.picture)[1]
        with open(result.picture, "rb") as handle:
            new_name = storage.save(f"{old_name}{extension}", File(handle))
        fields.update(file=new_name, size=storage.size(new_name), content_type=result.content_type)
    with transaction.atomic():
        updated = Attachment.objects.filter(pk=row.pk, status=Attachment.Status.PENDING).update(**fields)
        if updated:
            events.attachment_processed(row.conversation_id, row.pk)
            if new_name:
                transaction.on_commit(lambda: storage.delete(old_name))
    if not updated:
        if new_name:
            storage.delete(new_name)
        return None
    return result.status


def clean_text(text: str) -> str:
    """Text PostgreSQL can store: no NUL, no lone surrogate."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
