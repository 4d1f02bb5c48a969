"""The kinds of file the assistant reads: one row per kind, read by every part that cares.

Detection (name and first bytes), extraction (which reader), the parsers
(Pillow's format name), the ``ACCEPTED_TYPES`` default and the page's file
picker all take their facts from ``KINDS``, so a new kind is one row here
(and, for a new reader, a parser).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

_JSON_START = re.compile(rb'^(?:\xef\xbb\xbf)?\s*(?:[\[{"\-0-9]|true|false|null|$)')


@dataclass(frozen=True)
class FileKind:
    content_type: str
    extensions: tuple[str, ...]  # the first is the one a re-encoded file is stored under
    reader: str  # "text" (decoded in the worker) or a parser of ``agent.attachments.parsers``
    matches: Callable[[bytes], bool] | None = None  # a binary format's signature; for text, an optional shape
    picture_format: str = ""  # Pillow's name of the format, for pictures

    @property
    def is_text(self) -> bool:
        return self.reader == "text"

    @property
    def is_picture(self) -> bool:
        return bool(self.picture_format)


def _json_text(head: bytes) -> bool:
    return bool(_JSON_START.match(head))


KINDS: tuple[FileKind, ...] = (
    FileKind("text/plain", (".txt", ".text"), "text"),
    FileKind("text/markdown", (".md", ".markdown"), "text"),
    FileKind("text/csv", (".csv",), "text"),
    FileKind("application/json", (".json",), "text", _json_text),
    FileKind("application/pdf", (".pdf",), "pdf", lambda head: b"%PDF-" in head[:1024]),
    FileKind("image/png", (".png",), "picture", lambda head: head.startswith(b"\x89PNG\r\n\x1a\n"), "PNG"),
    FileKind("image/jpeg", (".jpg", ".jpeg"), "picture", lambda head: head.startswith(b"\xff\xd8\xff"), "JPEG"),
    FileKind("image/webp", (".webp",), "picture", lambda head: head[:4] == b"RIFF" and head[8:12] == b"WEBP", "WEBP"),
    FileKind("image/gif", (".gif",), "picture", lambda head: head[:6] in (b"GIF87a", b"GIF89a"), "GIF"),
    FileKind(XLSX_TYPE, (".xlsx",), "xlsx", lambda head: head.startswith(b"PK\x03\x04")),
)

BY_TYPE = {kind.content_type: kind for kind in KINDS}
BY_EXTENSION = {extension: kind for kind in KINDS for extension in kind.extensions}
PICTURE_TYPES = [kind.content_type for kind in KINDS if kind.is_picture]


def extensions_for(content_types: Iterable[str]) -> list[str]:
    """The file name endings of the given content types, in the table's order (the page's picker offers these)."""
    wanted = set(content_types)
    return [extension for kind in KINDS if kind.content_type in wanted for extension in kind.extensions]
