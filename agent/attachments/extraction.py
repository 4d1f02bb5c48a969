"""Reading a file once, in the task ``agent.process_attachment``.

Every byte comes through the storage's ``open()``, never a local path, so a
worker on any host reads what a web process on another host stored. Text kinds
are decoded here, in bounded chunks: a 20 MB single-line file costs one chunk
of memory and stops at ``ATTACHMENT_TEXT_CHARS``. PDF, XLSX and pictures are
streamed to ``parsers`` in a child process with a memory limit, killed at
``EXTRACTION_TIMEOUT_S``. The result is stored once: only a ``pending`` row is
updated, so a second delivery of the task changes nothing.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass
from typing import IO, Any

from django.core.files.base import ContentFile
from django.db import transaction

from ..core import events
from ..core.conf import agent_settings
from ..core.errors import FILE_FAILURES
from ..core.file_kinds import BY_TYPE
from ..core.ids import AttachmentId
from ..models import Attachment
from . import parsers

logger = logging.getLogger(__name__)
CHUNK_BYTES = 64 * 1024
ERROR_CODES = tuple(FILE_FAILURES)  # what a reading may fail with, each with its sentence
REENCODED_TYPES = ("image/png", "image/jpeg")  # what the picture parser writes


@dataclass(frozen=True)
class Result:
    error_code: str = ""
    text: str = ""
    complete: bool = True
    picture: bytes = b""  # a re-encoded picture
    content_type: str | None = None

    @property
    def status(self) -> str:
        return Attachment.Status.FAILED if self.error_code else Attachment.Status.READY


def process(attachment_id: AttachmentId) -> str | None:
    """Extract a pending file and store the result; its status, or None when there was nothing to do."""
    try:
        pk = uuid.UUID(str(attachment_id))
    except ValueError:
        return None
    row = Attachment.objects.filter(pk=pk, status=Attachment.Status.PENDING).defer("text").first()
    if row is None:
        return None
    return store(row, extract(row))


def extract(row: Attachment) -> Result:
    kind = BY_TYPE.get(row.content_type)
    if kind is None:
        return Result(error_code="unreadable")
    try:
        handle = row.open_stored()
    except Exception as error:  # each storage fails in its own way (OSError, botocore's ClientError, ...)
        return unreadable_in_storage(row, error)
    with handle:
        source = StoredFile(handle)
        try:
            return read_text(source) if kind.is_text else run_parser(kind.reader, source, row.content_type)
        except StorageReadError as error:
            return unreadable_in_storage(row, error.__cause__ or error)


class StorageReadError(Exception):
    """Reading the stored file failed part way (the storage's own error is the cause)."""


class StoredFile:
    """A storage's open file whose read errors, whatever the backend, are ``StorageReadError``."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle

    def read(self, size: int) -> bytes:
        try:
            return self.handle.read(size)
        except Exception as error:
            raise StorageReadError() from error


def unreadable_in_storage(row: Attachment, error: BaseException) -> Result:
    """The stored file could not be read (another host's folder, a missing object): said in the log, by ids."""
    logger.warning(
        "agent: the stored file of attachment %s (user %s) could not be read (%s)",
        row.pk,
        row.user_id,
        type(error).__name__,
    )
    return Result(error_code="unreadable")


def read_text(source: StoredFile) -> Result:
    """UTF-8 with replacement, a chunk at a time, up to ``ATTACHMENT_TEXT_CHARS``."""
    limit = agent_settings.ATTACHMENT_TEXT_CHARS
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    parts: list[str] = []
    size = 0
    while size <= limit:
        chunk = source.read(CHUNK_BYTES)
        text = decoder.decode(chunk, final=not chunk)
        parts.append(text[: limit + 1 - size])
        size += len(parts[-1])
        if not chunk:
            break
    text = "".join(parts)
    return Result(text=text[:limit], complete=len(text) <= limit)


def run_parser(kind: str, source: StoredFile, content_type: str) -> Result:
    """Stream ``source`` to a parser child on its standard input and read its answer."""
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
        "picture_format": BY_TYPE[content_type].picture_format,
    }
    # isolated (-I) and with no secret of the worker's environment: a parser bug exploited finds nothing
    env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
    command = [sys.executable, "-I", parsers.__file__, kind, json.dumps(limits)]
    timeout = agent_settings.EXTRACTION_TIMEOUT_S
    read_errors: list[StorageReadError] = []
    with tempfile.TemporaryDirectory(prefix="agent-file-") as scratch:  # the child's working folder, and only that
        read_end, write_end = os.pipe()
        try:
            child = subprocess.Popen(
                command, stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=scratch, env=env
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        feeder = threading.Thread(
            target=_feed, args=(source, write_end, read_errors), name="agent-extraction-feed", daemon=True
        )
        feeder.start()
        try:
            out, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            return Result(error_code="extraction_timeout")
        finally:
            feeder.join(timeout)  # a dead child breaks the pipe, which ends the feed
    if read_errors:
        raise read_errors[0]
    return parse_answer(out)


def _feed(source: StoredFile, fd: int, errors: list[StorageReadError]) -> None:
    """Copy the stored file into the child's standard input, a chunk at a time."""
    try:
        with os.fdopen(fd, "wb") as pipe:
            while chunk := source.read(CHUNK_BYTES):
                pipe.write(chunk)
    except BrokenPipeError:  # the child stopped reading (its memory limit, a crash): its answer says so
        pass
    except StorageReadError as error:  # the storage failed mid-file
        errors.append(error)


def parse_answer(out: bytes) -> Result:
    """The child's JSON line, and the re-encoded picture's bytes after it."""
    head, _newline, picture = out.partition(b"\n")
    try:
        answer = json.loads(head)
    except ValueError:  # killed at its memory limit, or crashed
        return Result(error_code="unreadable")
    if not answer.get("ok"):
        code = answer.get("code")
        return Result(error_code=code if code in ERROR_CODES else "unreadable")
    content_type = answer.get("content_type")
    if picture and content_type not in REENCODED_TYPES:
        return Result(error_code="unreadable")
    return Result(
        text=str(answer.get("text") or ""),
        complete=bool(answer.get("complete")),
        picture=picture,
        content_type=content_type,
    )


def store(row: Attachment, result: Result) -> str | None:
    """Store the result on a still-pending row and tell the chat's tabs after commit."""
    storage = row.file.storage
    old_name = row.stored_as
    fields: dict[str, Any] = {
        "status": result.status,
        "error_code": result.error_code,
        "text": clean_text(result.text),
        "text_complete": result.complete,
    }
    new_name = None
    if result.picture and not result.error_code:
        extension = BY_TYPE[str(result.content_type)].extensions[0]
        new_name = storage.save(f"{old_name}{extension}", ContentFile(result.picture))
        fields.update(file=new_name, size=len(result.picture), content_type=result.content_type)
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
