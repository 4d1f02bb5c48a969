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

from ..core.file_kinds import BY_EXTENSION, BY_TYPE, KINDS

HEAD_BYTES = 8192

_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f]")
MAX_NAME = 255


def detect(name: str, head: bytes) -> str | None:
    """The content type both ``name`` and ``head`` (the file's first bytes) agree on, else None."""
    kind = BY_EXTENSION.get(os.path.splitext(name)[1].lower())
    if kind is None:
        return None
    if kind.is_text:
        agrees = looks_like_text(head) and (kind.matches is None or kind.matches(head))
    else:
        agrees = kind.matches is not None and kind.matches(head)
    return kind.content_type if agrees else None


def looks_like_text(head: bytes) -> bool:
    """No NUL byte and no binary format's signature."""
    return b"\x00" not in head and not any(k.matches(head) for k in KINDS if not k.is_text and k.matches)


def is_picture(content_type: str) -> bool:
    kind = BY_TYPE.get(content_type)
    return kind is not None and kind.is_picture


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
