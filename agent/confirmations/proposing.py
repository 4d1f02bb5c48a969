"""A model's write becomes a waiting card: its preview and the digest of the data it would change,
taken with the site's own checks run in a transaction that is undone."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Iterator

from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from ..core.conf import agent_settings
from ..models import Confirmation, Conversation
from ..tools.registry import Refused, Tool, ToolContext, ToolResult, compute_fingerprint

logger = logging.getLogger(__name__)
Status = Confirmation.Status


def propose(tool: Tool, ctx: ToolContext, args: dict[str, Any], *, call_id: str, turn: Any) -> ToolResult:
    """A model's write call becomes a waiting card (the executor checked the tool and its arguments).

    The model is told only that a confirmation is required, and the card's id.
    """
    if waiting_duplicate(ctx.conversation, tool.name, args):
        return ToolResult("denied", {"error": "duplicate", "message": _("Already waiting for confirmation.")})
    try:
        fingerprint = current_fingerprint(tool, ctx, args) if tool.fingerprint is not None else None
        with rolled_back():
            if tool.validate is not None:
                tool.validate(ctx, **args)
            preview = tool.preview(ctx, **args)  # type: ignore[misc]
        if fingerprint is None:
            fingerprint = compute_fingerprint(tool, ctx, args, preview)
    except (SoftTimeLimitExceeded, Refused, ValidationError):  # the deadline; the site's own refusals
        raise
    except Exception as error:
        logger.exception("agent tool %s: preview failed", tool.name)
        return ToolResult("error", {"error": type(error).__name__})
    confirmation = create_confirmation(
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
        "needs_confirmation",
        {"status": "confirmation_required", "confirmation_id": str(confirmation.pk)},
        confirmation=confirmation,
    )


@contextmanager
def rolled_back() -> Iterator[None]:
    """Run the site's checks of a write that was not confirmed yet in a transaction that is undone.

    A serializer's ``validate()``, a form's ``clean()`` or a ``save()`` that touches the database
    (stops a running timer, takes a number from a counter) changes nothing before the user's
    Confirm; what the checks do outside the database (mail, a call to another service) is the site's.
    """
    with transaction.atomic():
        try:
            yield
        finally:
            transaction.set_rollback(True)


def current_fingerprint(tool: Tool, ctx: ToolContext, args: dict[str, Any]) -> str:
    """The digest of the data the write would change as it is now, read without keeping any change."""
    with rolled_back():
        return compute_fingerprint(tool, ctx, args)


def create_confirmation(
    user: Any,
    conversation: Conversation,
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
        conversation=conversation,
        turn=turn if getattr(turn, "pk", None) else None,
        tool_name=tool_name,
        call_id=call_id,
        arguments=arguments,
        preview=preview,
        fingerprint=fingerprint,
        expires_at=now + timedelta(seconds=agent_settings.CONFIRMATION_TTL_S),
    )


def waiting_duplicate(conversation: Conversation, tool_name: str, arguments: dict[str, Any]) -> bool:
    """Whether a card of this chat already waits for the same change."""
    waiting = Confirmation.objects.filter(
        conversation=conversation, tool_name=tool_name, status=Status.WAITING, expires_at__gt=timezone.now()
    ).values_list("arguments", flat=True)
    return any(args == arguments for args in waiting)
