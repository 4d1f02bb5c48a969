"""A stored file sent to its owner: streamed from the storage a chunk at a time, whole or one byte range.

Django's ``FileResponse`` under ASGI reads a synchronous file into a list
before it sends the first byte; ``StoredFileResponse`` hands the ASGI server
one chunk at a time instead, each read in a thread of its own, so a download
costs daphne a chunk of memory whatever the file's size. A ``Range`` request
gets its one range (206), or 416 when the file has no such bytes.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import IO, Any, AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.http import FileResponse, HttpResponse
from django.http.response import HttpResponseBase

from ..core.errors import FileGone
from ..models import Attachment

logger = logging.getLogger(__name__)
CHUNK_BYTES = 64 * 1024
_ONE_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive, as in Content-Range

    @property
    def length(self) -> int:
        return self.end - self.start + 1


class Unsatisfiable(Exception):
    """The range asks for bytes past the file's end."""


def requested_range(header: str | None, size: int) -> ByteRange | None:
    """The one byte range ``header`` asks for, or None to send the whole file.

    Several ranges, another unit or a malformed header get the whole file, as
    HTTP allows a server to ignore ``Range``; a range that starts past the end
    raises ``Unsatisfiable``.
    """
    match = _ONE_RANGE.match((header or "").strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first:
        if not last:
            return None
        if int(last) == 0 or size == 0:
            raise Unsatisfiable()
        return ByteRange(max(0, size - int(last)), size - 1)
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise Unsatisfiable()
    return ByteRange(start, min(int(last), size - 1) if last else size - 1)


def entity_tag(attachment: Attachment) -> str:
    """A ready file's bytes never change, so its id tells one version from another."""
    return f'"{attachment.pk.hex}"'


def respond(
    attachment: Attachment, handle: IO[bytes], request_headers: Any, **response_options: Any
) -> HttpResponseBase:
    """The response for the owner's open file: 200 whole, 206 one range, 416 no such range.

    The file's first chunk is read here, before any header is sent, so a
    stored file that cannot be read (another host's folder, a missing object)
    is ``NotFound``, logged by ids, instead of a broken 200.
    """
    try:
        size = int(handle.size)  # type: ignore[attr-defined]
        wanted = _range_unless_changed(request_headers, attachment, size)
        if wanted is not None:
            handle.seek(wanted.start)
        length = wanted.length if wanted is not None else size
        window = Window(handle, length)
        window.peek()
    except Unsatisfiable:
        handle.close()
        unsatisfiable = HttpResponse(status=416)
        unsatisfiable["Content-Range"] = f"bytes */{size}"
        return _common(unsatisfiable, attachment)
    except Exception as error:  # each storage fails in its own way (OSError, botocore's ClientError, ...)
        handle.close()
        raise unreadable(attachment, error) from None
    response = StoredFileResponse(window, length=length, **response_options)
    if wanted is not None:
        response.status_code = 206
        response["Content-Range"] = f"bytes {wanted.start}-{wanted.end}/{size}"
    return _common(response, attachment)


def unreadable(attachment: Attachment, error: BaseException) -> FileGone:
    """Log a stored file that cannot be read (ids and the error's type only); the refusal to answer with."""
    logger.warning(
        "agent: the stored file of attachment %s (user %s) could not be read for a download (%s)",
        attachment.pk,
        attachment.user_id,
        type(error).__name__,
    )
    return FileGone()


def _range_unless_changed(request_headers: Any, attachment: Attachment, size: int) -> ByteRange | None:
    """``Range`` counts only when an ``If-Range`` (if any) names this very file."""
    if_range = request_headers.get("If-Range")
    if if_range is not None and if_range.strip() != entity_tag(attachment):
        return None
    return requested_range(request_headers.get("Range"), size)


def _common(response: HttpResponseBase, attachment: Attachment) -> HttpResponseBase:
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = entity_tag(attachment)
    return response


class Window:
    """At most ``length`` bytes of an open file, from where it stands; closing it closes the file."""

    def __init__(self, handle: IO[bytes], length: int) -> None:
        self.handle = handle
        self.left = length
        self.first = b""

    def peek(self) -> None:
        """Read the first chunk now (its errors are the caller's to answer)."""
        self.first = self._read_handle(CHUNK_BYTES)

    def read(self, size: int = -1) -> bytes:
        if self.first:
            chunk, self.first = self.first, b""
            return chunk
        return self._read_handle(size)

    def _read_handle(self, size: int) -> bytes:
        wanted = self.left if size is None or size < 0 else min(size, self.left)
        if wanted <= 0:
            return b""
        chunk = self.handle.read(wanted)
        self.left -= len(chunk)
        return chunk

    def close(self) -> None:
        self.handle.close()


class StoredFileResponse(FileResponse):
    """A ``FileResponse`` of a ``Window`` that an ASGI server reads a chunk at a time."""

    _iterator: Iterator[bytes]  # StreamingHttpResponse's own, which its stubs leave out

    def __init__(self, window: Window, *, length: int, **kwargs: Any) -> None:
        super().__init__(window, **kwargs)
        self.window = window
        self._window_chunks = self._iterator
        self["Content-Length"] = str(length)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._iterator is not self._window_chunks:  # a middleware wrapped the content: send what it made
            async for part in super().__aiter__():
                yield part
            return
        read = sync_to_async(self.window.read, thread_sensitive=False)  # never the thread the views share
        while chunk := await read(self.block_size):
            yield chunk
