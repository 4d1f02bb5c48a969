"""The off-purpose marker: how the model says a request is not what the assistant is for. A fresh
nonce per turn for its system prompt, the marker cut from the answer (a flag only with the turn's
nonce), and held back from a draft while the model begins it.

Text the model writes, apart from the caps: the flags it raises are counted, towards the
off-purpose block, by ``agent.limits.admission``."""

from __future__ import annotations

import secrets

from django.utils.crypto import constant_time_compare

MARKER_OPEN, MARKER_CLOSE = "⟦off_purpose:", "⟧"
"""The model flags an off-purpose request with ``⟦off_purpose: <nonce> <reason>⟧`` at the very end of
its answer, ``<nonce>`` being the one its turn's system prompt gave (the prompt teaches it);
``cut_marker`` reads it."""

NONCE_BYTES = 8


def marker_nonce() -> str:
    """A fresh nonce for one turn's system prompt. Only a marker that carries it flags the turn:
    a file or a tool result never sees the prompt, so a marker it makes the model copy flags nothing."""
    return secrets.token_hex(NONCE_BYTES)


def marker_example(nonce: str) -> str:
    """The marker as the prompt shows it to the model."""
    return f"{MARKER_OPEN} {nonce} <reason>{MARKER_CLOSE}"


def cut_marker(content: str, nonce: str) -> tuple[str, str | None]:
    """The answer without a marker at its very end, and the marker's reason when it carries this
    turn's ``nonce`` (None: no flag). The reason is returned without the nonce.

    A marker at the end without the nonce is cut all the same (the user never sees it) but flags
    nothing; a marker anywhere else is left in the text and flags nothing.
    """
    stripped = content.rstrip()
    start = stripped.rfind(MARKER_OPEN)
    if start < 0 or not stripped.endswith(MARKER_CLOSE) or MARKER_CLOSE in stripped[start:-1]:
        return content, None
    text = stripped[:start].rstrip()
    given, _space, reason = stripped[start + len(MARKER_OPEN) : -1].strip().partition(" ")
    if not nonce or not constant_time_compare(given, nonce):
        return text, None
    return text, reason.strip()


def draft_text(text: str) -> str:
    """The answer so far as a tab may see it: a marker the model has begun at its end is held back."""
    start = text.rfind(MARKER_OPEN)
    if start >= 0:
        return text[:start].rstrip()
    start = text.rfind(MARKER_OPEN[0])
    if start >= 0 and MARKER_OPEN.startswith(text[start:]):
        return text[:start].rstrip()
    return text
