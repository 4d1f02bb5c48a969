"""A write's card: the preview (the fields the call sets, validated by the view's serializer and
editable where a widget fits; the object a delete removes) and the fingerprint of the object's
data whose change since the card was shown makes it stale. Only a write has a card; the read
path never comes here."""

from __future__ import annotations

import hashlib
from typing import Any, Callable

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.utils.text import capfirst
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.viewsets import GenericViewSet

from ...core.conf import agent_settings
from ..registry import ToolContext, card_value, object_name
from .actions import WRITES, Action, split_arguments
from .dispatch import refusal, view_for


def tool_preview(action: Action) -> Callable[..., Any]:
    """What the card shows: for a create or an update, the fields the call sets (an update's old
    value beside the new), editable where a widget fits; for a delete, the object as it is."""

    def preview(ctx: ToolContext, **args: Any) -> dict[str, Any]:
        view, instance, serializer = _prepared(action, ctx, args, checks=True)
        rows = []
        if instance is not None:
            label = capfirst(str(instance._meta.verbose_name))
            rows.append({"name": action.lookup, "label": label, "value": object_name(instance), "editable": False})
        current = _state(action, view, instance) if instance is not None else {}
        fields = view.get_serializer(instance).fields
        given = current if action.name == "destroy" else split_arguments(action, args)[1]
        # in the serializer's order, not the arguments' (a stored card's arguments come back reordered)
        shown = [(name, given[name]) for name in fields if name in given] + [
            (name, value) for name, value in sorted(given.items()) if name not in fields
        ]
        for name, value in shown:
            field = fields.get(name)
            kind = _editable_type(field) if serializer is not None and field is not None else None
            shown_value = value if kind is not None else card_value(value)
            row: dict[str, Any] = {
                "name": name,
                "label": str(getattr(field, "label", None) or name),
                "value": shown_value,
            }
            if serializer is not None and instance is not None:
                row["old"] = card_value(current.get(name))
            row["editable"] = kind is not None
            if kind is not None:
                row["type"] = kind
            if kind == "choice":
                row["choices"] = [[key, str(text)] for key, text in field.choices.items()]
            rows.append(row)
        return {"fields": rows}

    return preview


def tool_fingerprint(action: Action, chosen: list[str] | None) -> Callable[..., str]:
    """A digest of the object's data the write would change, as the user's serializer shows it: a
    change made since the card was shown refuses the click. Only the writable fields (or the
    ``chosen`` ones) and the lookup count: a read-only, computed or time-dependent value (a
    running duration, a modified time) never makes a card stale. An action on no one object (a
    create) has no state to compare; its checks run when the view is dispatched at Confirm."""

    def fingerprint(ctx: ToolContext, **args: Any) -> str:
        if not action.detail:
            return hashlib.sha256(b"null").hexdigest()
        lookup = args.get(action.lookup)
        view, instance, _serializer = _prepared(action, ctx, {action.lookup: lookup}, checks=False)
        serializer = _state_serializer(action, view, instance)
        names = chosen if chosen is not None else [n for n, f in serializer.fields.items() if not f.read_only]
        data = serializer.data
        state = {"lookup": str(lookup), "fields": {name: data.get(name) for name in names}}
        return hashlib.sha256(JSONRenderer().render(state)).hexdigest()

    return fingerprint


def _prepared(action: Action, ctx: ToolContext, args: dict[str, Any], *, checks: bool) -> tuple[Any, Any, Any]:
    """The view set up as its dispatch would, up to the change itself: with ``checks``, its
    authentication, permissions and throttles, and the serializer bound to the arguments and
    validated; always its object (``get_queryset`` scoping and object permissions run).
    (view, object or None, serializer or None)."""
    _in_url, rest = split_arguments(action, args)
    view = view_for(action, ctx.scope, args, data=rest)
    try:
        if checks:
            _throttles_judge_only(view)
            view.initial(view.request, **view.kwargs)
        instance = view.get_object() if action.detail else None
        if not checks or action.name not in WRITES or action.name == "destroy":
            return view, instance, None
        serializer = view.get_serializer(instance, data=rest, partial=action.name == "partial_update")
        if not serializer.is_valid():
            raise ValidationError(_messages(serializer.errors))
        return view, instance, serializer
    except (APIException, Http404, PermissionDenied) as refused:
        raise refusal(view.handle_exception(refused)) from None


def _throttles_judge_only(view: GenericViewSet) -> None:
    """Let the view's throttles refuse a user they would refuse now, without counting this pass.

    A card's preview and the checks of an edit are not requests the user made: only the view's
    dispatch at Confirm is, and it counts once, as the user's own HTTP request would. DRF's rate
    throttles (and every throttle built on ``SimpleRateThrottle``) record a request in
    ``throttle_success`` alone; a throttle keeping its count some other way is left to that dispatch."""
    throttles = view.get_throttles

    def judging_only() -> list[Any]:
        judging = [throttle for throttle in throttles() if isinstance(throttle, SimpleRateThrottle)]
        for throttle in judging:
            throttle.throttle_success = lambda: True
        return judging

    view.get_throttles = judging_only


def _messages(errors: Any) -> dict[str, list[str]]:
    """A serializer's errors as a ``ValidationError`` takes them: each field's sentences."""
    if not isinstance(errors, dict):
        return {"__all__": [str(e) for e in errors]}
    return {
        ("__all__" if name == "non_field_errors" else name): [str(e) for e in (v if isinstance(v, list) else [v])]
        for name, v in errors.items()
    }


def _state(action: Action, view: GenericViewSet, instance: Any) -> Any:
    """The object as the viewset shows it to this user."""
    return _state_serializer(action, view, instance).data


def _state_serializer(action: Action, view: GenericViewSet, instance: Any) -> serializers.BaseSerializer:
    """The serializer the viewset shows the object with to this user: the one its ``retrieve``
    would use for an ``@action``, whose own serializer may be one of input alone."""
    if action.name not in WRITES:
        view = action.viewset(
            basename=action.basename,
            detail=True,
            action="retrieve",
            request=view.request,
            format_kwarg=None,
            args=(),
            kwargs=view.kwargs,
        )
    return view.get_serializer(instance)


def _editable_type(field: serializers.Field) -> str | None:
    """The widget a card gives a serializer field, or None for one the user edits elsewhere. A
    choice among more than ``TOOL_ENUM_MAX`` is typed (the serializer judges it), not listed."""
    if isinstance(field, serializers.BooleanField):
        return "boolean"
    if isinstance(field, serializers.ChoiceField) and not isinstance(field, serializers.MultipleChoiceField):
        return "choice" if len(field.choices) <= agent_settings.TOOL_ENUM_MAX else "text"
    if isinstance(field, serializers.IntegerField):
        return "integer"
    if isinstance(field, (serializers.FloatField, serializers.DecimalField)):
        return "number"
    if isinstance(field, serializers.DateTimeField):
        return "datetime"
    if isinstance(field, serializers.DateField):
        return "date"
    if isinstance(field, serializers.CharField):
        short = field.max_length is not None and field.max_length <= 200
        return "text" if short else "textarea"
    return None
