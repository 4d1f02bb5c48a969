"""A waiting card decided: applied once when its user confirms and everything still holds,
cancelled, expired, or cancelled when its message leaves the chat's line."""

from __future__ import annotations

import json
import logging
from typing import Any
from uuid import UUID

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from .. import notices
from ..access import Actor, Scope, authorize_session
from ..conversations import parse_uuid
from ..core.conf import agent_settings
from ..core.errors import Expired, NotFound, NotWaiting
from ..core.ids import ConfirmationId
from ..models import Confirmation, Conversation, Message
from ..tools.registry import Refused, ToolContext, may_write, registry
from .edits import changed_fields, validate_edited
from .proposing import current_fingerprint

logger = logging.getLogger(__name__)
Status = Confirmation.Status


def confirm(actor: Actor, confirmation_id: ConfirmationId, *, impersonated: bool, edits: Any = None) -> Confirmation:
    """Apply the card's change, once, if everything still holds at the click.

    ``edits`` maps fields the card offers for editing to the user's values. They go through
    everything the model's arguments went through (the schema, the tool's own validation, the
    permission held now); invalid ones raise ``ValidationError`` by field and the card waits on.
    """
    scope = authorize_session(actor, impersonated=impersonated)
    confirmation = _owned_waiting(scope, confirmation_id)
    tool = registry.get(confirmation.tool_name)
    if tool is None or not may_write(scope, tool):
        return _settle(confirmation, Status.FAILED, "not_permitted")
    ctx = ToolContext(scope.user, scope, confirmation.conversation, confirmation.turn_id, scope.language)
    changed = changed_fields(confirmation, edits)
    arguments = {**confirmation.arguments, **changed}
    if changed:
        try:
            validate_edited(tool, ctx, arguments)
        except Refused:  # the site's own check refuses the user now: a permission lost since the preview
            return _settle(confirmation, Status.FAILED, "not_permitted")
    return _apply(confirmation, tool, ctx, arguments, changed)


def cancel(actor: Actor, confirmation_id: ConfirmationId, *, impersonated: bool) -> Confirmation:
    """Drop the card's change."""
    scope = authorize_session(actor, impersonated=impersonated)
    confirmation = _owned_waiting(scope, confirmation_id)
    return _settle(confirmation, Status.CANCELLED, "")


def settle_lapsed(conversation: Conversation | Any) -> int:
    """Waiting cards of the chat past their time become ``expired``; how many."""
    conversation_id: Any = getattr(conversation, "pk", conversation)
    lapsed = Confirmation.objects.filter(
        conversation_id=conversation_id, status=Status.WAITING, expires_at__lte=timezone.now()
    )
    settled = 0
    for confirmation in lapsed:
        try:
            _settle(confirmation, Status.EXPIRED, "")
            settled += 1
        except NotWaiting:
            pass
    return settled


def cancel_off_line(conversation_id: UUID, old_end: Any) -> int:
    """Cancel the chat's waiting cards whose message has just left the active line; how many.

    Called when an edit, a regenerate or a switch moves the line (in its transaction, the chat's
    row locked). Such a card cannot be seen to be decided, and the line now shown may propose the
    same change again, which a card still waiting would refuse as a duplicate; so it is cancelled,
    not carried over (the new answer is the model's own, and proposes what it proposes). Its
    notice goes on the card's own line, after ``old_end`` (that line's last message), so a switch
    back shows the card and why it was cancelled.
    """
    waiting = Confirmation.objects.filter(
        conversation_id=conversation_id,
        status=Status.WAITING,
        messages__active=False,
        messages__role=Message.Role.TOOL,
    )
    below = old_end
    cancelled = 0
    for confirmation in waiting:
        if Confirmation.objects.filter(pk=confirmation.pk, status=Status.WAITING).update(
            status=Status.CANCELLED, decided_at=timezone.now(), outcome="left_line"
        ):
            params = {"tool": confirmation.tool_name}
            below = notices.write_off_line(
                conversation_id, below, "confirmation_left_line", params, confirmation=confirmation
            ).pk
            cancelled += 1
    return cancelled


def _owned_waiting(scope: Scope, confirmation_id: ConfirmationId) -> Confirmation:
    pk = parse_uuid(confirmation_id)
    confirmation = (
        Confirmation.objects.select_related("conversation", "turn")
        .filter(pk=pk, user_id=scope.user_id)
        .exclude(conversation__status=Conversation.Status.DELETED)
        .first()
    )
    if confirmation is None:
        raise NotFound()
    if confirmation.status != Status.WAITING:
        raise NotWaiting(status=confirmation.status)
    if confirmation.expires_at <= timezone.now():
        _settle(confirmation, Status.EXPIRED, "")
        raise Expired()
    return confirmation


def _apply(
    confirmation: Confirmation, tool: Any, ctx: ToolContext, arguments: dict[str, Any], edits: dict[str, Any]
) -> Confirmation:
    """Claim the card, check the data and run the write in one transaction.

    The claim is one conditional UPDATE, so a double click runs the write once.
    """
    with transaction.atomic():
        now = timezone.now()
        if not Confirmation.objects.filter(pk=confirmation.pk, status=Status.WAITING).update(
            status=Status.DONE, decided_at=now, edits=edits or None
        ):
            raise NotWaiting()
        confirmation.edits = edits or None
        status, outcome, confirmation.result = _run_write(confirmation, tool, ctx, arguments)
        if status != Status.DONE:
            Confirmation.objects.filter(pk=confirmation.pk).update(status=status, outcome=outcome)
        elif confirmation.result:
            Confirmation.objects.filter(pk=confirmation.pk).update(result=confirmation.result)
        _outcome_notice(confirmation, status)
    confirmation.status, confirmation.decided_at, confirmation.outcome = status, now, outcome
    return confirmation


def _run_write(
    confirmation: Confirmation, tool: Any, ctx: ToolContext, arguments: dict[str, Any]
) -> tuple[str, str, str]:
    """The write, unless the data changed since the preview; its status, outcome text and what
    it returned, as the model is told it.

    The data is the one the card showed: its digest is taken for the model's arguments, which
    name the object; the write runs with the arguments as the user left them.
    """
    try:
        with transaction.atomic():
            if current_fingerprint(tool, ctx, confirmation.arguments) != confirmation.fingerprint:
                return Status.STALE, "data_changed", ""
            returned = tool.func(ctx, **arguments)
    except Refused as refused:  # the site's own checks, run again at the click
        return Status.FAILED, refused.outcome, ""
    except Exception as error:
        logger.exception("agent card %s: %s failed", confirmation.pk, confirmation.tool_name)
        return Status.FAILED, type(error).__name__, ""
    return Status.DONE, "", _as_told(returned) if tool.tell_result else ""


def _as_told(returned: Any) -> str:
    """A write's answer as the model reads it in the next turn: JSON, cut to ``TOOL_RESULT_CHARS``."""
    if returned is None:
        return ""
    text = json.dumps(returned, ensure_ascii=False, cls=DjangoJSONEncoder)
    return text[: agent_settings.TOOL_RESULT_CHARS]


def _settle(confirmation: Confirmation, status: str, outcome: str) -> Confirmation:
    """End a waiting card without running it; a card already decided is ``NotWaiting``."""
    with transaction.atomic():
        now = timezone.now()
        updated = Confirmation.objects.filter(pk=confirmation.pk, status=Status.WAITING).update(
            status=status, decided_at=now, outcome=outcome
        )
        if not updated:
            raise NotWaiting()
        _outcome_notice(confirmation, status)
    confirmation.status, confirmation.decided_at, confirmation.outcome = status, now, outcome
    return confirmation


def _outcome_notice(confirmation: Confirmation, status: str) -> None:
    # a deleted chat gets no notice: the card's outcome stays on the card
    params: dict[str, Any] = {"tool": confirmation.tool_name}
    if confirmation.edits:
        params["edited"] = True
    if confirmation.result:
        params["returned"] = True  # what the write returned is on the card, for the model's next turn
    notices.write_unless_gone(confirmation.conversation_id, f"confirmation_{status}", params, confirmation=confirmation)
