"""An action's arguments as JSON Schema: a detail action's lookup, a list's filters, ordering and
pages, a write's serializer fields. Known without a request for a listing of every tool, and per
user's request (the serializer and filters the viewset chooses for it) for a turn."""

from __future__ import annotations

import logging
from typing import Any, Callable

from django import forms
from django.utils.translation import get_language
from rest_framework import serializers
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.schemas.openapi import AutoSchema
from rest_framework.viewsets import GenericViewSet

from ..registry import EMPTY_OBJECT
from .actions import WRITES, Action
from .dispatch import view_for

logger = logging.getLogger(__name__)


def parameters_known_without_request(action: Action) -> dict[str, Any]:
    """The parameters as far as the viewset's classes tell them with no request: what a listing of
    every tool shows. A viewset whose code needs a request for them gives its lookup alone here;
    each user's turn gets the full ones (``tool_parameters_for``)."""
    try:
        return _parameters(action, _introspected(action))
    except Exception:
        return _parameters(action, None)


def _introspected(action: Action) -> GenericViewSet:
    """The viewset as its own code sees it for ``action`` with no request at all."""
    view = action.viewset(
        action=action.handler, request=None, format_kwarg=None, args=(), kwargs={}, **action.initkwargs
    )
    view.action_map = {action.method.lower(): action.handler}
    return view


def tool_parameters_for(action: Action) -> Callable[[Any], dict[str, Any]]:
    """The parameters this user's request gets: built from the serializer (and filters) the
    viewset chooses for it, once per serializer class, so every user of one class shares them."""
    built: dict[Any, dict[str, Any]] = {}

    def parameters_for(scope: Any) -> dict[str, Any]:
        try:
            view = view_for(action, scope)
            key = (get_language(), _schema_key(action, view))  # labels and help texts are in the user's language
            if key not in built:
                built[key] = _parameters(action, view)
            return built[key]
        except Exception:
            logger.exception("agent tool of %s.%s: its parameters failed", action.viewset.__name__, action.name)
            return parameters_known_without_request(action)

    return parameters_for


def _schema_key(action: Action, view: Any) -> Any:
    """What the parameters depend on for this request: the serializer class of a write (and its
    fields, which a serializer may shape by its request), the filterset and paginator of a list."""
    if action.name == "list":
        backends = tuple(view.filter_backends)
        filterset = getattr(view, "filterset_class", None) or getattr(view, "filterset_fields", None)
        return ("list", backends, str(filterset), type(view.paginator))
    if action.writes and action.name != "destroy" and _takes_body(action, view):
        serializer = view.get_serializer()
        fields = tuple((name, field.read_only, field.required) for name, field in serializer.fields.items())
        return ("body", type(serializer), fields)
    return ("lookup",)


def _parameters(action: Action, view: GenericViewSet | None) -> dict[str, Any]:
    """The action's arguments as JSON Schema: the lookup of a detail action, the list's query
    parameters, the serializer's writable fields for a write that takes a body."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    if action.detail:
        properties[action.lookup] = {"type": ["integer", "string"], "description": f"The object's {action.lookup}."}
        required.append(action.lookup)
    for name in action.path_keywords:
        properties[name] = {"type": ["integer", "string"], "description": name.replace("_", " ").capitalize()}
        required.append(name)
    if view is not None and action.name == "list":
        properties.update(_query_parameters(view))
    elif view is not None and action.writes and action.name != "destroy" and _takes_body(action, view):
        body = _body_schema(view, partial=action.name == "partial_update" or action.name not in WRITES)
        properties.update(body["properties"])
        required += [name for name in body.get("required", []) if name not in required]
    schema: dict[str, Any] = {**EMPTY_OBJECT, "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _takes_body(action: Action, view: Any) -> bool:
    """A create or an update takes the serializer's fields; an ``@action`` only those of a
    serializer of its own (``@action(serializer_class=...)``, or one ``get_serializer_class``
    chooses for it), never the viewset's, whose fields it would ignore."""
    if action.name in WRITES:
        return True
    if "serializer_class" in action.initkwargs:
        return True
    general = action.viewset(
        action="retrieve", request=view.request, format_kwarg=None, args=(), kwargs=view.kwargs, detail=True
    )
    try:
        return bool(view.get_serializer_class() is not general.get_serializer_class())
    except (AssertionError, AttributeError):  # no serializer at all for one of them
        return False


def _query_parameters(view: GenericViewSet) -> dict[str, Any]:
    parameters = []
    for backend in view.filter_backends:
        if issubclass(backend, SearchFilter) and not getattr(view, "search_fields", None):
            continue
        if issubclass(backend, OrderingFilter):
            parameters += _ordering_parameters(backend, view)
        elif hasattr(backend, "get_filterset_class"):  # django-filter's DjangoFilterBackend, or one built like it
            parameters += _filterset_parameters(backend(), view)
        elif hasattr(backend, "get_schema_operation_parameters"):
            parameters += backend().get_schema_operation_parameters(view)
    if view.paginator is not None:
        parameters += view.paginator.get_schema_operation_parameters(view)
    return {
        p["name"]: {**_json_schema(p.get("schema") or {}), "description": str(p.get("description") or "")}
        for p in parameters
        if p.get("in") == "query"
    }


def _ordering_parameters(backend: type[OrderingFilter], view: GenericViewSet) -> list[dict[str, Any]]:
    """``ordering`` with the fields the viewset allows (and their ``-`` forms, for descending)."""
    fields = getattr(view, "ordering_fields", None)
    if fields is None:
        return []
    schema: dict[str, Any] = {"type": "string"}
    description = str(backend.ordering_description)
    if isinstance(fields, (list, tuple)):
        names = [name if isinstance(name, str) else name[0] for name in fields]
        schema["enum"] = [*names, *(f"-{name}" for name in names)]
        description = f"{description} A '-' in front orders descending."
    return [{"name": backend.ordering_param, "in": "query", "description": description, "schema": schema}]


def _filterset_parameters(backend: Any, view: GenericViewSet) -> list[dict[str, Any]]:
    """The filters of the filterset the backend would use (the view's ``filterset_class``, or one
    made of its ``filterset_fields``) as query parameters, read from the filterset itself: the
    backend's own schema method went in django-filter 25.1. Bound to the viewset's queryset, as
    for a request, its filters have their labels ("Title contains") and keep their ``help_text``."""
    queryset = getattr(view, "queryset", None)
    filterset_class = backend.get_filterset_class(view, queryset)
    if filterset_class is None:
        return []
    filters = filterset_class(queryset=queryset).filters if queryset is not None else filterset_class.base_filters
    return [
        {"name": name, "in": "query", "description": _filter_words(name, f), "schema": _filter_schema(f)}
        for name, f in filters.items()
    ]


def _filter_words(name: str, query_filter: Any) -> str:
    label, help_text = str(query_filter.label or name), query_filter.extra.get("help_text")
    return f"{label}: {help_text}" if help_text else label


def _filter_schema(query_filter: Any) -> dict[str, Any]:
    """A filter's value as JSON Schema, from the form field that cleans it."""
    field_class, choices = query_filter.field_class, query_filter.extra.get("choices")
    if issubclass(field_class, forms.BooleanField):  # a NullBooleanField too
        return {"type": "boolean"}
    if issubclass(field_class, (forms.DecimalField, forms.FloatField)):  # before IntegerField, their base
        return {"type": "number"}
    if issubclass(field_class, forms.IntegerField):
        return {"type": "integer"}
    if issubclass(field_class, forms.DateTimeField):
        return {"type": "string", "format": "date-time"}
    if issubclass(field_class, forms.DateField):
        return {"type": "string", "format": "date"}
    if issubclass(field_class, forms.ModelChoiceField):
        return {"type": ["integer", "string"]}
    if issubclass(field_class, forms.ChoiceField) and isinstance(choices, (list, tuple)):
        keys = [key for key, _label in choices if key != ""]
        return (
            {"type": "array", "items": {"enum": keys}}
            if issubclass(field_class, forms.MultipleChoiceField)
            else {"enum": keys}
        )
    return {"type": "string"}


def _body_schema(view: GenericViewSet, *, partial: bool) -> dict[str, Any]:
    serializer = view.get_serializer()
    schema = AutoSchema()
    schema.view = view
    mapped = schema.map_serializer(serializer)
    writable = {name for name, field in serializer.fields.items() if _offered(field)}
    properties = {name: _json_schema(s) for name, s in mapped["properties"].items() if name in writable}
    required = [] if partial else [name for name in mapped.get("required", []) if name in writable]
    return {"properties": properties, "required": required}


def _offered(field: serializers.Field) -> bool:
    """A field the model can fill: writable, and not a file (no JSON value uploads one)."""
    return not field.read_only and not isinstance(field, serializers.FileField)


def _json_schema(openapi: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI's field schema as JSON Schema: ``nullable`` becomes a null type, annotations go."""
    schema = {k: v for k, v in openapi.items() if k not in ("readOnly", "writeOnly", "nullable")}
    if openapi.get("nullable") and isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
    if "enum" in schema and openapi.get("nullable"):
        schema["enum"] = [*schema["enum"], None]
    return schema
