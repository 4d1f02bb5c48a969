"""Refusals: why a call was not carried out, as stable string codes with a sentence for people.

Every client is told the same thing, the body ``error_body`` builds: the code a
program branches on, the message (in the active language) a person reads, and
the fields or the limit it concerns. HTTP answers it with the refusal's status,
the websocket and the event stream in an ``error`` frame, so no client keeps
its own table of texts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

SIGNED_OUT = _("You were signed out. Sign in again to go on.")


class Refusal(Exception):
    code: ClassVar[str] = "refused"
    http_status: ClassVar[int] = 403
    """The HTTP status the JSON API answers with: each refusal's own, set on its class."""
    default_message: ClassVar[str | Promise] = _("Something went wrong. Try again.")
    """What a person is told, unless the raiser passes a more precise ``message``."""

    def __init__(self, **params: Any) -> None:
        super().__init__(self.code)
        self.params = params

    @property
    def message(self) -> str:
        """The sentence for people, in the active language."""
        return str(self.params.get("message") or self.default_message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r})"


class Impersonated(Refusal):
    code = "impersonated"
    http_status = 401
    default_message = _("The assistant is not available while you act as another user.")


class SessionGone(Refusal):
    code = "session_gone"
    http_status = 401
    default_message = SIGNED_OUT


class Mismatch(Refusal):
    code = "mismatch"
    http_status = 401
    default_message = SIGNED_OUT


class Inactive(Refusal):
    code = "inactive"
    http_status = 401
    default_message = SIGNED_OUT


class ScopeRefused(Refusal):
    """A site's own scope check (``AGENT["SCOPE_CHECKS"]``) said no."""

    http_status = 401
    default_message = SIGNED_OUT

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code  # type: ignore[misc]
        self.args = (code,)


class Forbidden(Refusal):
    code = "forbidden"
    http_status = 403
    default_message = _("You may not use the assistant. Ask the site's staff if you think you should.")


class NotFound(Refusal):
    code = "not_found"
    http_status = 404
    default_message = _("This chat is no longer there.")


class FileGone(NotFound):
    """A file that is not there for this user: removed, someone else's, or unreadable in the storage."""

    default_message = _("The file is gone.")


class AppNotConnected(NotFound):
    """No live token of this user's for this OAuth client: another user's, disconnected, or no such client."""

    default_message = _("This app is not connected to your assistant.")


class InvalidCursor(Refusal):
    code = "invalid_cursor"
    http_status = 400
    default_message = _("The list changed while it was read. Reload the page.")


class Busy(Refusal):
    code = "busy"
    http_status = 409
    default_message = _("The assistant is still working in this chat. Wait for it to finish or press Stop.")


class TooManyTurns(Refusal):
    code = "too_many_turns"
    http_status = 429
    default_message = _("You have too many turns running at once. Wait for one to finish.")


class TooManyChats(Refusal):
    """``NEW_CHATS_PER_MINUTE``: params ``limit``, ``cap``, ``used``, ``frees_at`` and ``message``."""

    code = "too_many_chats"
    http_status = 429
    default_message = _("You started too many chats in one minute. Try again in a minute.")


class TooManyUploads(Refusal):
    """``UPLOADS_PER_MINUTE``: params as ``TooManyChats``."""

    code = "too_many_uploads"
    http_status = 429
    default_message = _("Too many files in one minute. Try again in a minute.")


class TooManyTranscriptions(Refusal):
    """``TRANSCRIPTIONS_PER_MINUTE``: params as ``TooManyChats``."""

    code = "too_many_transcriptions"
    http_status = 429
    default_message = _("Too many recordings in one minute. Try again in a minute.")


class TooManyStreams(Refusal):
    """``MAX_STREAMS_PER_USER``: the user's open sockets and event streams together."""

    code = "too_many_streams"
    http_status = 429
    default_message = _("The assistant is open in too many tabs. Close some of them, then reload this page.")


class StorageFull(Refusal):
    """``MAX_STORED_BYTES_PER_USER``: params ``limit``, ``cap`` and ``used`` (bytes), ``size`` (the
    refused file's) and ``message``."""

    code = "storage_full"
    http_status = 413
    default_message = _("Your files take all the room you may use. Remove files you no longer need.")


class BudgetExceeded(Refusal):
    code = "budget_exceeded"
    http_status = 429
    default_message = _("The assistant's spending limit for today was reached. Try again later.")


class Blocked(Refusal):
    code = "off_purpose_blocked"
    http_status = 403
    default_message = _("The assistant is paused for you for a while. Try again later.")


class NotConfigured(Refusal):
    code = "endpoint_not_configured"
    http_status = 503
    default_message = _("No model is configured for the assistant yet. Ask the site's staff.")


class SpeechFailed(Refusal):
    """The speech endpoint gave no text; the message is the one a failed model call's notice gives."""

    code = "model_failed"
    http_status = 502
    default_message = _("The recording could not be turned into text. Try again.")


class TelegramNotOffered(Refusal):
    """Telegram is off on this site, or the user lacks ``agent.use_telegram``."""

    code = "telegram_not_offered"
    http_status = 403
    default_message = _("The assistant is not offered to you in Telegram.")


class Expired(Refusal):
    code = "expired"
    http_status = 409
    default_message = _("This request expired before it was decided.")


class NotWaiting(Refusal):
    code = "not_waiting"
    http_status = 409
    default_message = _("This request was already decided.")


class ToolFailed(Refusal):
    """The site's own code (its view, serializer or form) raised while checking the user's edits of
    a card; the card waits on and the traceback is in the site's log."""

    code = "tool_failed"
    http_status = 409
    default_message = _("The site could not check these values. Change them, or try again later.")


class StalePage(Refusal):
    """The request's CSRF token was refused: the page is older than the session's token."""

    code = "csrf_failed"
    http_status = 403
    default_message = _("This page is out of date. Reload it and try again.")


class TooLarge(Refusal):
    """A request body over what the site reads at once."""

    code = "too_large"
    http_status = 413
    default_message = _("This is too much to send at once.")


class BadFrame(Refusal):
    """A websocket frame that is not one the page sends."""

    code = "bad_frame"
    http_status = 400
    default_message = _("The page sent something the server did not understand. Reload it and try again.")


SESSION_REFUSALS = (Impersonated, SessionGone, Mismatch, Inactive, ScopeRefused)
"""Refusals that mean the session itself may no longer act."""


def refusal_named(code: str) -> Refusal:
    """The refusal a code names, as an event tells it (a site's own scope check's code: ``ScopeRefused``)."""
    kind = next((kind for kind in Refusal.__subclasses__() if kind.__dict__.get("code") == code), None)
    return kind() if kind is not None else ScopeRefused(code)


LIMIT_KEYS = ("limit", "cap", "used", "frees_at")


def error_body(refusal: Refusal) -> dict[str, Any]:
    """What every client is told of a refusal: its code, its message and, for a quota, the limit's standing."""
    body: dict[str, Any] = {"error": refusal.code, "message": refusal.message}
    if "cap" in refusal.params:
        body["limit"] = {key: refusal.params.get(key) for key in LIMIT_KEYS}
    return body


def invalid_body(invalid: ValidationError) -> dict[str, Any]:
    """Invalid input as every client is told it: the code (``invalid`` unless the error names one), every
    message in one sentence, and the messages by field (``__all__`` for the whole input)."""
    fields = invalid.message_dict if hasattr(invalid, "error_dict") else {"__all__": invalid.messages}
    message = " ".join(text for texts in fields.values() for text in texts)
    return {"error": getattr(invalid, "code", None) or "invalid", "message": message, "fields": fields}


FILE_FAILURES: dict[str, Promise] = {
    "pdf_encrypted": _("The PDF is protected by a password."),
    "pdf_no_text": _("The PDF has no text to read (a scan?)."),
    "unreadable": _("The file could not be read."),
    "too_many_pixels": _("The picture is too large."),
    "extraction_timeout": _("Reading the file took too long."),
}
"""Why a file that was taken could not be read, by the code stored on it: what its chip says."""


def file_failure_message(code: str) -> str:
    """A stored file's failure in the active language (an unknown code reads as unreadable)."""
    return str(FILE_FAILURES.get(code, FILE_FAILURES["unreadable"]))


class McpNotOffered(Refusal):
    """MCP is off on this site, or the user lacks ``agent.use_mcp``."""

    code = "mcp_not_offered"
    http_status = 403
    default_message = _("The assistant's tools are not offered to you in other apps.")
