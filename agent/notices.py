"""What the system tells the user in a chat, written in one place."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils.translation import gettext_lazy

from .ai import endpoints
from .core.errors import NotFound
from .limits import caps
from .models import Message, Turn

MODEL_FAILED = "model_failed"

_TEXTS = {
    "empty_answer": gettext_lazy("The assistant gave an empty answer. Try asking again."),
    "max_rounds": gettext_lazy("The assistant used all its steps for this turn and stopped."),
    "pictures_not_seen": gettext_lazy("This model cannot see pictures; the files were taken off the message."),
    "stopped": gettext_lazy("Stopped."),
    "deadline": gettext_lazy("The turn took too long and was stopped."),
    "interrupted": gettext_lazy("The turn was interrupted. You can send the message again."),
    "session_ended": gettext_lazy("Your session ended, so the turn was stopped. Sign in again to go on."),
    "forbidden": gettext_lazy("You may no longer use the assistant, so the turn was stopped."),
    "lock_lost": gettext_lazy("Another turn took over this chat, so this one was stopped."),
    "confirmation_done": gettext_lazy("Done: %(tool)s."),
    "confirmation_cancelled": gettext_lazy("Cancelled: %(tool)s."),
    "confirmation_left_line": gettext_lazy(
        "Cancelled: %(tool)s. It was proposed in a version of the chat you left, so it can no longer be confirmed."
    ),
    "confirmation_expired": gettext_lazy("The request to confirm %(tool)s expired."),
    "confirmation_stale": gettext_lazy("Not done: the data changed since %(tool)s was proposed."),
    "confirmation_failed": gettext_lazy("Failed: %(tool)s."),
}

_EDITED_TEXTS = {
    "confirmation_done": gettext_lazy("Done, with your changes: %(tool)s."),
    "confirmation_stale": gettext_lazy(
        "Not done: the data changed since %(tool)s was proposed (your changes were not applied)."
    ),
    "confirmation_failed": gettext_lazy("Failed, with your changes: %(tool)s."),
}
"""A card the user edited before confirming says so in its outcome."""

_MODEL_FAILED_TEXTS = {
    "endpoint_not_configured": gettext_lazy("No model is configured for the assistant."),
    "endpoint_disabled": gettext_lazy("The assistant's model is switched off."),
    "invalid_api_key": gettext_lazy("The model's API key was refused."),
    "api_key_forbidden": gettext_lazy("The model's API key may not use this model."),
    "model_not_found": gettext_lazy("The model was not found at its endpoint."),
    "rate_limited": gettext_lazy("The model is busy (rate limited). Try again in a moment."),
    "request_timeout": gettext_lazy("The model did not answer in time."),
    "connection_error": gettext_lazy("The model could not be reached."),
    "api_error": gettext_lazy("The model's service answered with an error (%(status)s)."),
    "invalid_response": gettext_lazy("The model's answer could not be read."),
    "budget_exceeded": gettext_lazy("The assistant's spending limit was reached (%(limit)s)."),
}

ENDPOINT_FALLBACK = "endpoint_fallback"

_FALLBACK_TEXTS = {
    "disabled": gettext_lazy("Your own model is switched off, so the site's default model answers."),
    "not_allowed": gettext_lazy("Your own model may no longer be picked, so the site's default model answers."),
    "gone": gettext_lazy("Your own model was removed, so the site's default model answers."),
}

CODES = frozenset(_TEXTS) | {MODEL_FAILED, ENDPOINT_FALLBACK}

_SUCCESS_NOTICES = frozenset({"confirmation_done"})
_NEUTRAL_NOTICES = frozenset(
    {"stopped", "confirmation_cancelled", "confirmation_left_line", "endpoint_fallback", "pictures_not_seen"}
)


def tone(code: str) -> str:
    """How a notice looks: ``success`` (a change made), ``error`` (something failed), or ``info``."""
    if code in _SUCCESS_NOTICES:
        return "success"
    return "info" if code in _NEUTRAL_NOTICES else "error"


def write(conversation_id: UUID, code: str, params: dict[str, Any] | None = None, **fields: Any) -> Message:
    """Store a notice in a chat and broadcast it (the caller has done its checks)."""
    from .conversations import append_message

    if code not in CODES:
        raise ValueError(f"unknown notice code {code!r}")
    return append_message(
        conversation_id, role=Message.Role.NOTICE, notice_code=code, notice_params=params or {}, **fields
    )


def write_off_line(conversation_id: UUID, parent_id: UUID, code: str, params: dict[str, Any], **fields: Any) -> Message:
    """Store a notice below ``parent_id`` on a line the chat no longer shows (``append_off_line``)."""
    from .conversations import append_off_line

    if code not in CODES:
        raise ValueError(f"unknown notice code {code!r}")
    return append_off_line(
        conversation_id, parent_id, role=Message.Role.NOTICE, notice_code=code, notice_params=params, **fields
    )


def write_unless_gone(
    conversation_id: UUID, code: str, params: dict[str, Any] | None = None, **fields: Any
) -> Message | None:
    """``write``, or nothing when the chat was deleted; the caller's transaction goes on either way."""
    try:
        with transaction.atomic():
            return write(conversation_id, code, params, **fields)
    except NotFound:
        return None


def text(code: str, params: dict[str, Any] | None = None) -> str:
    """The notice in the active language; never provider text or customer data."""
    params = dict(params or {})
    if code == ENDPOINT_FALLBACK:
        return str(_FALLBACK_TEXTS.get(params.get("reason", ""), _FALLBACK_TEXTS["disabled"]))
    if code == MODEL_FAILED:
        if params.get("code") == "budget_exceeded" and (explained := caps.message(params)):
            return explained  # the cap, its use and when it frees up
        template = _MODEL_FAILED_TEXTS.get(params.get("code", ""), _MODEL_FAILED_TEXTS["api_error"])
        params.setdefault("status", "?")
        params.setdefault("limit", "?")
    else:
        known = (_EDITED_TEXTS.get(code) if params.get("edited") else None) or _TEXTS.get(code)
        if known is None:
            return code
        template = known
        params.setdefault("tool", "?")
    try:
        return str(template) % params
    except (KeyError, TypeError, ValueError):
        return str(template)


def fallback_to_tell(turn: Turn) -> dict[str, str] | None:
    """The ``endpoint_fallback`` notice's params when this turn's user has not been told of this
    fallback yet (None when there is nothing to tell).

    Told means: a notice with the same reason since the user's last turn that did not fall back
    for that reason. So a fallback is told once, and told again after it was mended and came back.
    """
    if turn.endpoint_source != endpoints.FALLBACK:
        return None
    others = Turn.objects.filter(user_id=turn.user_id).exclude(pk=turn.pk)
    last_other = (
        others.exclude(endpoint_source=endpoints.FALLBACK, endpoint_reason=turn.endpoint_reason)
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    told = Message.objects.filter(
        conversation__user_id=turn.user_id,
        role=Message.Role.NOTICE,
        notice_code=ENDPOINT_FALLBACK,
        notice_params__reason=turn.endpoint_reason,
    )
    if last_other is not None:
        told = told.filter(created_at__gt=last_other)
    return None if told.exists() else {"reason": turn.endpoint_reason}
