"""The fields a card lets its user change, and the user's values checked as the model's were: by
the tool's schema, its own validation and its preview, with refusals in the user's language."""

from __future__ import annotations

import logging
from typing import Any, Callable

from celery.exceptions import SoftTimeLimitExceeded
from django import forms
from django.core import validators
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..core.errors import ToolFailed
from ..models import Confirmation
from ..tools.registry import Refused, Tool, ToolContext
from .proposing import rolled_back

logger = logging.getLogger(__name__)


EDITABLE_TYPES = ("text", "textarea", "integer", "number", "boolean", "choice", "date", "datetime")
"""The kinds of value a card's field can be edited as; the page gives each a widget of its own."""


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


def changed_fields(confirmation: Confirmation, edits: Any) -> dict[str, Any]:
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


def validate_edited(tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> None:
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
