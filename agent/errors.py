"""Refusals: why a call was not carried out, as stable string codes.

Callers map them at the edge, in one place each: HTTP 403/404, a websocket
``{"error": code}`` frame, a notice in the chat.
"""
from __future__ import annotations

from typing import Any, ClassVar


class Refusal(Exception):
    code: ClassVar[str] = "refused"

    def __init__(self, **params: Any) -> None:
        super().__init__(self.code)
        self.params = params

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r})"


class Impersonated(Refusal):
    code = "impersonated"


class SessionGone(Refusal):
    code = "session_gone"


class Mismatch(Refusal):
    code = "mismatch"


class Inactive(Refusal):
    code = "inactive"


class ScopeRefused(Refusal):
    """A site's own scope check (``AGENT["SCOPE_CHECKS"]``) said no."""

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code  # type: ignore[misc]
        self.args = (code,)


class Forbidden(Refusal):
    code = "forbidden"


class NotFound(Refusal):
    code = "not_found"


class InvalidCursor(Refusal):
    code = "invalid_cursor"


class Busy(Refusal):
    code = "busy"


class TooManyTurns(Refusal):
    code = "too_many_turns"


class BudgetExceeded(Refusal):
    code = "budget_exceeded"


class Blocked(Refusal):
    code = "off_purpose_blocked"


class NotConfigured(Refusal):
    code = "endpoint_not_configured"


class Expired(Refusal):
    code = "expired"


class NotWaiting(Refusal):
    code = "not_waiting"


SESSION_REFUSALS = (Impersonated, SessionGone, Mismatch, Inactive, ScopeRefused)
"""Refusals that mean the session itself may no longer act."""
