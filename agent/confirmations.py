"""Cards: a write the model proposed, applied only when its user confirms."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from . import notices
from .access import Scope, SessionRef, authorize_session
from .conf import agent_settings
from .conversations import parse_uuid
from .errors import Expired, NotFound, NotWaiting
from .models import Confirmation, Conversation
from .tools.registry import Tool, ToolContext, ToolResult, compute_fingerprint, may_write, registry

logger = logging.getLogger(__name__)
Status = Confirmation.Status


def confirm(ref: SessionRef, confirmation_id: Any, *, impersonated: bool) -> Confirmation:
    """Apply the card's change, once, if everything still holds at the click."""
    scope = authorize_session(ref, impersonated=impersonated)
    card = _owned_waiting(scope, confirmation_id)
    tool = registry.get(card.tool_name)
    if tool is None or not may_write(scope, tool):
        return _settle(card, Status.FAILED, "not_permitted")
    ctx = ToolContext(scope.user, scope, card.conversation, card.turn_id, scope.language)
    return _apply(card, tool, ctx)


def cancel(ref: SessionRef, confirmation_id: Any, *, impersonated: bool) -> Confirmation:
    """Drop the card's change."""
    scope = authorize_session(ref, impersonated=impersonated)
    card = _owned_waiting(scope, confirmation_id)
    return _settle(card, Status.CANCELLED, "")


def settle_lapsed(conversation: Conversation | Any) -> int:
    """Waiting cards of the chat past their time become ``expired``; how many."""
    conversation_id: Any = getattr(conversation, "pk", conversation)
    lapsed = Confirmation.objects.filter(
        conversation_id=conversation_id, status=Status.WAITING, expires_at__lte=timezone.now()
    )
    settled = 0
    for card in lapsed:
        try:
            _settle(card, Status.EXPIRED, "")
            settled += 1
        except NotWaiting:
            pass
    return settled


def propose(tool: Tool, ctx: ToolContext, args: dict[str, Any], *, call_id: str, turn: Any) -> ToolResult:
    """A model's write call becomes a waiting card (the executor checked the tool and its arguments).

    The model is told only that a confirmation is required, and the card's id.
    """
    if waiting_duplicate(ctx.conversation, tool.name, args):
        return ToolResult("denied", {"error": "duplicate", "message": _("Already waiting for confirmation.")})
    try:
        preview = tool.preview(ctx, **args)  # type: ignore[misc]
        fingerprint = compute_fingerprint(tool, ctx, args, preview)
    except SoftTimeLimitExceeded:  # the turn's deadline, not the preview's failure
        raise
    except Exception as error:
        logger.exception("agent tool %s: preview failed", tool.name)
        return ToolResult("error", {"error": type(error).__name__})
    card = create_card(
        ctx.user,
        ctx.conversation,
        turn,
        tool_name=tool.name,
        call_id=call_id,
        arguments=args,
        preview=preview,
        fingerprint=fingerprint,
    )
    return ToolResult(
        "needs_confirmation", {"status": "confirmation_required", "confirmation_id": str(card.pk)}, confirmation=card
    )


def create_card(
    user: Any,
    chat: Conversation,
    turn: Any,
    *,
    tool_name: str,
    call_id: str,
    arguments: dict[str, Any],
    preview: Any,
    fingerprint: str,
) -> Confirmation:
    """A new waiting card (the executor has checked the tool and its arguments)."""
    now = timezone.now()
    return Confirmation.objects.create(
        user=user,
        conversation=chat,
        turn=turn if getattr(turn, "pk", None) else None,
        tool_name=tool_name,
        call_id=call_id,
        arguments=arguments,
        preview=preview,
        fingerprint=fingerprint,
        expires_at=now + timedelta(seconds=agent_settings.CONFIRMATION_TTL_S),
    )


def waiting_duplicate(chat: Conversation, tool_name: str, arguments: dict[str, Any]) -> bool:
    """Whether a card of this chat already waits for the same change."""
    waiting = Confirmation.objects.filter(
        conversation=chat, tool_name=tool_name, status=Status.WAITING, expires_at__gt=timezone.now()
    ).values_list("arguments", flat=True)
    return any(args == arguments for args in waiting)


def _owned_waiting(scope: Scope, confirmation_id: Any) -> Confirmation:
    pk = parse_uuid(confirmation_id)
    card = (
        Confirmation.objects.select_related("conversation", "turn")
        .filter(pk=pk, user_id=scope.user_id)
        .exclude(conversation__status=Conversation.Status.DELETED)
        .first()
    )
    if card is None:
        raise NotFound()
    if card.status != Status.WAITING:
        raise NotWaiting(status=card.status)
    if card.expires_at <= timezone.now():
        _settle(card, Status.EXPIRED, "")
        raise Expired()
    return card


def _apply(card: Confirmation, tool: Any, ctx: ToolContext) -> Confirmation:
    """Claim the card, check the data and run the write in one transaction.

    The claim is one conditional UPDATE, so a double click runs the write once.
    """
    with transaction.atomic():
        now = timezone.now()
        if not Confirmation.objects.filter(pk=card.pk, status=Status.WAITING).update(
            status=Status.DONE, decided_at=now
        ):
            raise NotWaiting()
        status, outcome = _run_write(card, tool, ctx)
        if status != Status.DONE:
            Confirmation.objects.filter(pk=card.pk).update(status=status, outcome=outcome)
        _outcome_notice(card, status)
    card.status, card.decided_at, card.outcome = status, now, outcome
    return card


def _run_write(card: Confirmation, tool: Any, ctx: ToolContext) -> tuple[str, str]:
    """The write, unless the data changed since the preview; its status and outcome text."""
    try:
        with transaction.atomic():
            if compute_fingerprint(tool, ctx, card.arguments) != card.fingerprint:
                return Status.STALE, "data_changed"
            tool.func(ctx, **card.arguments)
    except Exception as error:
        logger.exception("agent card %s: %s failed", card.pk, card.tool_name)
        return Status.FAILED, type(error).__name__
    return Status.DONE, ""


def _settle(card: Confirmation, status: str, outcome: str) -> Confirmation:
    """End a waiting card without running it; a card already decided is ``NotWaiting``."""
    with transaction.atomic():
        now = timezone.now()
        updated = Confirmation.objects.filter(pk=card.pk, status=Status.WAITING).update(
            status=status, decided_at=now, outcome=outcome
        )
        if not updated:
            raise NotWaiting()
        _outcome_notice(card, status)
    card.status, card.decided_at, card.outcome = status, now, outcome
    return card


def _outcome_notice(card: Confirmation, status: str) -> None:
    # a deleted chat gets no notice: the card's outcome stays on the card
    notices.write_unless_gone(
        card.conversation_id, f"confirmation_{status}", {"tool": card.tool_name}, confirmation=card
    )
