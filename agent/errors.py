"""Refusals: why a call was not carried out, as stable string codes.

Callers map them at the edge, in one place each: HTTP 403/404, a websocket
``{"error": code}`` frame, a notice in the chat.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Refusal(Exception):
    code: ClassVar[str] = "refused"
    http_status: ClassVar[int] = 403
    """The HTTP status the JSON API answers with: each refusal's own, set on its class."""

    def __init__(self, **params: Any) -> None:
        super().__init__(self.code)
        self.params = params

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r})"


class Impersonated(Refusal):
    code = "impersonated"
    http_status = 401


class SessionGone(Refusal):
    code = "session_gone"
    http_status = 401


class Mismatch(Refusal):
    code = "mismatch"
    http_status = 401


class Inactive(Refusal):
    code = "inactive"
    http_status = 401


class ScopeRefused(Refusal):
    """A site's own scope check (``AGENT["SCOPE_CHECKS"]``) said no."""

    http_status = 401

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code  # type: ignore[misc]
        self.args = (code,)


class Forbidden(Refusal):
    code = "forbidden"
    http_status = 403


class NotFound(Refusal):
    code = "not_found"
    http_status = 404


class InvalidCursor(Refusal):
    code = "invalid_cursor"
    http_status = 400


class Busy(Refusal):
    code = "busy"
    http_status = 409


class TooManyTurns(Refusal):
    code = "too_many_turns"
    http_status = 429


class TooManyChats(Refusal):
    """``NEW_CHATS_PER_MINUTE``: params ``limit``, ``cap``, ``used``, ``frees_at`` and ``message``."""

    code = "too_many_chats"
    http_status = 429


class TooManyUploads(Refusal):
    """``UPLOADS_PER_MINUTE``: params as ``TooManyChats``."""

    code = "too_many_uploads"
    http_status = 429


class StorageFull(Refusal):
    """``MAX_STORED_BYTES_PER_USER``: params ``limit``, ``cap`` and ``used`` (bytes), ``size`` (the
    refused file's) and ``message``."""

    code = "storage_full"
    http_status = 413


class BudgetExceeded(Refusal):
    code = "budget_exceeded"
    http_status = 429


class Blocked(Refusal):
    code = "off_purpose_blocked"
    http_status = 403


class NotConfigured(Refusal):
    code = "endpoint_not_configured"
    http_status = 503


class Expired(Refusal):
    code = "expired"
    http_status = 409


class NotWaiting(Refusal):
    code = "not_waiting"
    http_status = 409


SESSION_REFUSALS = (Impersonated, SessionGone, Mismatch, Inactive, ScopeRefused)
"""Refusals that mean the session itself may no longer act."""
