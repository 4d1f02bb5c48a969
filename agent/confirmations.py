"""Cards: a write the model proposed, applied only when its user confirms."""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Callable, Iterator
from uuid import UUID

from celery.exceptions import SoftTimeLimitExceeded
from django import forms
from django.core import validators
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from . import notices
from .access import Actor, Scope, authorize_session
from .conversations import parse_uuid
from .core.conf import agent_settings
from .core.errors import Expired, NotFound, NotWaiting, ToolFailed
from .core.ids import ConfirmationId
from .models import Confirmation, Conversation, Message
from .tools.registry import Refused, Tool, ToolContext, ToolResult, compute_fingerprint, may_write, registry

logger = logging.getLogger(__name__)
Status = Confirmation.Status


EDITABLE_TYPES = ("text", "textarea", "integer", "number", "boolean", "choice", "date", "datetime")
"""The kinds of value a card's field can be edited as; the page gives each a widget of its own."""


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
    changed = _changed_fields(confirmation, edits)
    arguments = {**confirmation.arguments, **changed}
    if changed:
        try:
            _validate_edited(tool, ctx, arguments)
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


def propose(tool: Tool, ctx: ToolContext, args: dict[str, Any], *, call_id: str, turn: Any) -> ToolResult:
    """A model's write call becomes a waiting card (the executor checked the tool and its arguments).

    The model is told only that a confirmation is required, and the card's id.
    """
    if waiting_duplicate(ctx.conversation, tool.name, args):
        return ToolResult("denied", {"error": "duplicate", "message": _("Already waiting for confirmation.")})
    try:
        fingerprint = _current_fingerprint(tool, ctx, args) if tool.fingerprint is not None else None
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


def _current_fingerprint(tool: Tool, ctx: ToolContext, args: dict[str, Any]) -> str:
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


def editable_fields(preview: Any) -> dict[str, dict[str, Any]]:
    """The fields a card's preview lets the user change, by name.

    A preview that offers edits is ``{"fields": [{"name", "label", "value", "editable", "type",
    "choices"?, "old"?}]}``: ``name`` is the argument the value goes to, ``type`` one of
    ``EDITABLE_TYPES``, ``old`` (an update's) the value it replaces.
    """
    fields = preview.get("fields") if isinstance(preview, dict) else None
    if not isinstance(fields, list):
        return {}
    return {
        f["name"]: f
        for f in fields
        if isinstance(f, dict)
        and f.get("editable")
        and isinstance(f.get("name"), str)
        and f.get("type") in EDITABLE_TYPES
    }


NOT_EDITABLE = gettext_lazy("This field cannot be changed on this card.")


def _changed_fields(confirmation: Confirmation, edits: Any) -> dict[str, Any]:
    """The user's edits that change something; any key the card does not offer refuses them all."""
    if edits is None:
        return {}
    if not isinstance(edits, dict):
        raise ValidationError({"__all__": [_("The edits must map fields to values.")]})
    offered = editable_fields(confirmation.preview)
    refused = sorted(key for key in edits if key not in offered)
    if refused:
        raise ValidationError({key: [str(NOT_EDITABLE)] for key in refused})
    return {key: value for key, value in edits.items() if value != offered[key].get("value")}


def _validate_edited(tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> None:
    """The edited arguments through the tool's schema, its own validation and its preview (where a
    tool built from a serializer or a form validates), as the model's went. A tool's refusal of them
    as ``invalid_arguments`` is the user's to correct; any other refusal is raised as it came."""
    problems: dict[str, list[str]] = {}
    for error in sorted(tool.validator_for(ctx.scope).iter_errors(arguments), key=lambda e: list(e.path)):
        problems.setdefault(str(error.path[0]) if error.path else "__all__", []).append(_for_a_person(error))
    if problems:
        raise ValidationError(problems)
    try:
        with rolled_back():
            if tool.validate is not None:
                tool.validate(ctx, **arguments)
            tool.preview(ctx, **arguments)  # type: ignore[misc]  # a write tool always has one
    except ValidationError as invalid:
        fields = invalid.message_dict if hasattr(invalid, "error_dict") else {"__all__": invalid.messages}
        raise ValidationError(fields) from None
    except Refused as refused:
        if refused.outcome != "invalid_arguments":
            raise
        raise ValidationError(_refused_fields(refused.result)) from None
    except SoftTimeLimitExceeded:
        raise
    except Exception:  # the site's code broke on the user's values: the card waits, the page is told
        logger.exception("agent tool %s: checking an edit failed", tool.name)
        raise ToolFailed() from None


def _refused_fields(result: Any) -> dict[str, list[str]]:
    """A tool's ``invalid_arguments`` answer as messages by field, as a ``ValidationError`` takes them:
    its ``details`` map fields to messages (a serializer's errors) or list messages for the whole card."""
    details = result.get("details") if isinstance(result, dict) else None
    if isinstance(details, dict) and details:
        return {
            ("__all__" if name in ("non_field_errors", "detail") else str(name)): _texts(messages)
            for name, messages in details.items()
        }
    if isinstance(details, list) and details:
        return {"__all__": _texts(details)}
    return {"__all__": [str(validators.RegexValidator.message)]}  # Django's "Enter a valid value."


def _texts(messages: Any) -> list[str]:
    return [str(m) for m in messages] if isinstance(messages, list) else [str(messages)]


def _for_a_person(error: Any) -> str:
    """A schema's refusal of an edit in the user's language: Django's own sentence for the same rule
    (its catalogue has them in every language), else Django's "Enter a valid value"."""
    rule, limit, value = error.validator, error.validator_value, error.instance
    checks: dict[str, Callable[[], None]] = {
        "maxLength": lambda: validators.MaxLengthValidator(limit)(value),
        "minLength": lambda: validators.MinLengthValidator(limit)(value),
        "maximum": lambda: validators.MaxValueValidator(limit)(value),
        "minimum": lambda: validators.MinValueValidator(limit)(value),
        "enum": lambda: forms.ChoiceField(choices=[(c, c) for c in limit]).clean(value),
        "type": lambda: _check_type(limit, value),
    }
    try:
        checks.get(rule, lambda: None)()
    except ValidationError as invalid:
        return " ".join(invalid.messages)
    return str(validators.RegexValidator.message)


def _check_type(kind: Any, value: Any) -> None:
    fields = {"integer": forms.IntegerField, "number": forms.FloatField, "string": forms.CharField}
    field = fields.get(kind) if isinstance(kind, str) else None
    if field is not None:
        field().clean(value)


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
            if _current_fingerprint(tool, ctx, confirmation.arguments) != confirmation.fingerprint:
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
