"""What a file is, decided by its content and its name together.

The name's extension says what the user meant; the first bytes (each format's
own signature) must agree. Text kinds have no signature: they must hold no NUL
byte and start with none of the binary signatures. Nothing here trusts the
browser's ``Content-Type``.
"""

from __future__ import annotations

import os
import re
import unicodedata

from ..conf import PICTURE_TYPES, XLSX_TYPE

HEAD_BYTES = 8192

BY_EXTENSION = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".xlsx": XLSX_TYPE,
}

TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/csv", "application/json"})

_SIGNATURES = {
    "application/pdf": lambda head: b"%PDF-" in head[:1024],
    "image/png": lambda head: head.startswith(b"\x89PNG\r\n\x1a\n"),
    "image/jpeg": lambda head: head.startswith(b"\xff\xd8\xff"),
    "image/gif": lambda head: head[:6] in (b"GIF87a", b"GIF89a"),
    "image/webp": lambda head: head[:4] == b"RIFF" and head[8:12] == b"WEBP",
    XLSX_TYPE: lambda head: head.startswith(b"PK\x03\x04"),
}

_JSON_START = re.compile(rb'^(?:\xef\xbb\xbf)?\s*(?:[\[{"\-0-9]|true|false|null|$)')
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f]")
MAX_NAME = 255


def detect(name: str, head: bytes) -> str | None:
    """The content type both ``name`` and ``head`` (the file's first bytes) agree on, else None."""
    content_type = BY_EXTENSION.get(os.path.splitext(name)[1].lower())
    if content_type is None:
        return None
    if content_type in TEXT_TYPES:
        return content_type if looks_like_text(head, content_type) else None
    return content_type if _SIGNATURES[content_type](head) else None


def looks_like_text(head: bytes, content_type: str) -> bool:
    if b"\x00" in head or any(matches(head) for matches in _SIGNATURES.values()):
        return False
    return content_type != "application/json" or bool(_JSON_START.match(head))


def is_picture(content_type: str) -> bool:
    return content_type in PICTURE_TYPES


def base_name(name: object) -> str:
    """The uploaded name without any path part or control character, at most 255 characters."""
    text = unicodedata.normalize("NFC", str(name or ""))
    text = _UNSAFE_NAME.sub("", text.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if text in ("", ".", ".."):
        text = "file"
    if len(text) > MAX_NAME:
        stem, extension = os.path.splitext(text)
        extension = extension[:16]
        text = stem[: MAX_NAME - len(extension)] + extension
    return text
