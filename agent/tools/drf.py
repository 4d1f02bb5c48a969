"""Tools from a site's Django REST Framework viewsets: the site's own views, run as the live user.

``register_viewset`` makes one tool per action. Every call dispatches the real view with a
request of the live session (``agent.tools.requests``), so authentication, permission classes
(object-level too), throttles, ``get_queryset`` scoping, filter backends and serializer
validation all run as they do for the user's own HTTP request; the view's refusal is the
tool's. Reads answer with the response data; writes become cards whose preview the serializer
validated, and run only at the user's Confirm, through the view again.

DRF is an optional extra (``django-agent[drf]``): only this module imports it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from django import forms
from django.core.exceptions import ImproperlyConfigured, PermissionDenied, ValidationError
from django.http import Http404
from django.urls import NoReverseMatch, reverse
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.schemas.openapi import AutoSchema
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.viewsets import GenericViewSet

from .registry import Refused, Tool, ToolContext, declared
from .requests import live_request

READS = ("list", "retrieve")
WRITES = {"create": "POST", "update": "PUT", "partial_update": "PATCH", "destroy": "DELETE"}
DETAIL = {"retrieve", "update", "partial_update", "destroy"}
TITLES = {
    "list": _("List %(things)s"),
    "retrieve": _("Read %(thing)s"),
    "create": _("Create %(thing)s"),
    "update": _("Change %(thing)s"),
    "partial_update": _("Change %(thing)s"),
    "destroy": _("Delete %(thing)s"),
}
DENIED_STATUSES = {401: "not_authenticated", 403: "permission_denied", 404: "not_found", 405: "not_allowed"}


@dataclass(frozen=True)
class Action:
    """One action of a viewset as a tool calls it, and as the site's router routes it."""

    viewset: type[GenericViewSet]
    name: str
    method: str
    detail: bool
    lookup: str  # the URL keyword naming the object of a detail action
    basename: str
    handler: str  # the viewset's method that answers ``method`` (an ``@action``'s mapping may name another)
    route: str  # the URL name the router gives the action
    initkwargs: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """What ``@action(...)`` sets on the view for this action alone (``permission_classes``,
    ``serializer_class``, ``throttle_classes``, ...), given to the view as the router gives it."""

    @property
    def writes(self) -> bool:
        return self.method not in ("GET", "HEAD", "OPTIONS")


def register_viewset(
    viewset_class: type[GenericViewSet],
    *,
    basename: str,
    actions: Iterable[str] | None = None,
    module: str | None = None,
    names: Mapping[str, str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    titles: Mapping[str, Any] | None = None,
) -> list[Tool]:
    """One tool per action of the viewset (``actions`` picks some): reads for ``list`` and
    ``retrieve``, writes of ``module`` (default: the model's app label) for the rest.

    ``names``, ``descriptions`` and ``titles`` (what the page calls a tool: lazy translations)
    replace, by action, what is made from the viewset, its docstrings and its model's name."""
    found = _actions(viewset_class, basename)
    wanted = list(actions) if actions is not None else list(found)
    unknown = sorted(set(wanted) - set(found))
    if unknown:
        raise ImproperlyConfigured(f"{viewset_class.__name__} has no action {', '.join(unknown)}.")
    model = _model_of(viewset_class)
    write_module = module or (model._meta.app_label if model is not None else None)
    tools = []
    for name in wanted:
        action = found[name]
        if action.writes and not write_module:
            raise ImproperlyConfigured(f"{viewset_class.__name__}: name the module of its writes (module=...).")
        tool = Tool(
            name=(names or {}).get(name, f"{basename}_{name}"),
            kind="write" if action.writes else "read",
            description=(descriptions or {}).get(name) or _description(action, model),
            func=_run(action),
            parameters=_parameters(action),
            module=write_module if action.writes else None,
            preview=_preview(action) if action.writes else None,
            fingerprint=_fingerprint(action) if action.writes else None,
            title=(titles or {}).get(name) or _title(action, model),
        )
        tools.append(declared(tool))
    return tools


# -- what the viewset has --------------------------------------------------------------


def _actions(viewset_class: type[GenericViewSet], basename: str) -> dict[str, Action]:
    lookup = str(getattr(viewset_class, "lookup_url_kwarg", None) or getattr(viewset_class, "lookup_field", "pk"))
    found = {}
    for name in READS + tuple(WRITES):
        if hasattr(viewset_class, name):
            method, detail = WRITES.get(name, "GET"), name in DETAIL
            route = f"{basename}-{'detail' if detail else 'list'}"
            found[name] = Action(viewset_class, name, method, detail, lookup, basename, name, route)
    for extra in viewset_class.get_extra_actions():
        methods = [m.upper() for m in extra.mapping]
        unsafe = [m for m in methods if m not in ("GET", "HEAD", "OPTIONS")]
        method = unsafe[0] if unsafe else "GET"
        found[extra.__name__] = Action(
            viewset_class,
            extra.__name__,
            method,
            bool(extra.detail),
            lookup,
            basename,
            handler=extra.mapping[method.lower()],
            route=f"{basename}-{extra.url_name}",
            initkwargs=dict(extra.kwargs),
        )
    return found


def _model_of(viewset_class: type[GenericViewSet]) -> Any:
    queryset = getattr(viewset_class, "queryset", None)
    return getattr(queryset, "model", None)


def _introspected(action: Action) -> GenericViewSet:
    """The viewset as its own code sees it for ``action``, with no request: for its serializer."""
    view = action.viewset(
        action=action.handler, request=None, format_kwarg=None, args=(), kwargs={}, **action.initkwargs
    )
    view.action_map = {action.method.lower(): action.handler}
    return view


def _title(action: Action, model: Any) -> Any:
    template = TITLES.get(action.name)
    if template is None or model is None:
        return None
    meta = model._meta
    return lazy(lambda: str(template) % {"thing": meta.verbose_name, "things": meta.verbose_name_plural}, str)()


def _description(action: Action, model: Any) -> str:
    own = getattr(getattr(action.viewset, action.name, None), "__doc__", None)
    inherited = own and getattr(getattr(GenericViewSet, action.name, None), "__doc__", None) == own
    if own and not inherited and str(own).strip():
        return str(own).strip()
    what = str(model._meta.verbose_name_plural) if model is not None else action.basename
    general = (action.viewset.__doc__ or "").strip().split("\n\n")[0]
    phrase = {
        "list": f"List the {what} the user may see; filters, search, ordering and pages are parameters.",
        "retrieve": f"Read one of the {what} the user may see, by its {action.lookup}.",
        "create": f"Create one of the user's {what}. The user confirms it on a card first.",
        "update": f"Replace one of the user's {what}, by its {action.lookup}. The user confirms it on a card first.",
        "partial_update": f"Change some fields of one of the user's {what}. The user confirms it on a card first.",
        "destroy": f"Delete one of the user's {what}, by its {action.lookup}. The user confirms it on a card first.",
    }.get(action.name, f"The {action.name.replace('_', ' ')} action on the user's {what}.")
    return f"{general} {phrase}".strip()


# -- parameters --------------------------------------------------------------------


def _parameters(action: Action) -> dict[str, Any]:
    """The action's arguments as JSON Schema: the lookup of a detail action, the list's query
    parameters, the serializer's writable fields for a write."""
    view = _introspected(action)
    properties: dict[str, Any] = {}
    required: list[str] = []
    if action.detail:
        properties[action.lookup] = {"type": ["integer", "string"], "description": f"The object's {action.lookup}."}
        required.append(action.lookup)
    if action.name == "list":
        properties.update(_query_parameters(view))
    elif action.writes and action.name != "destroy":
        body = _body_schema(view, partial=action.name == "partial_update" or action.name not in WRITES)
        properties.update(body["properties"])
        required += [name for name in body.get("required", []) if name not in required]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _query_parameters(view: GenericViewSet) -> dict[str, Any]:
    parameters = []
    for backend in view.filter_backends:
        if issubclass(backend, SearchFilter) and not getattr(view, "search_fields", None):
            continue
        if issubclass(backend, OrderingFilter) and getattr(view, "ordering_fields", None) is None:
            continue
        if hasattr(backend, "get_filterset_class"):  # django-filter's DjangoFilterBackend, or one built like it
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


def _filterset_parameters(backend: Any, view: GenericViewSet) -> list[dict[str, Any]]:
    """The filters of the filterset the backend would use (the view's ``filterset_class``, or one
    made of its ``filterset_fields``) as query parameters, read from the filterset itself: the
    backend's own schema method went in django-filter 25.1. Bound to the viewset's queryset, as
    for a request, its filters have their labels ("Title contains")."""
    queryset = getattr(view, "queryset", None)
    filterset_class = backend.get_filterset_class(view, queryset)
    if filterset_class is None:
        return []
    filters = filterset_class(queryset=queryset).filters if queryset is not None else filterset_class.base_filters
    return [
        {"name": name, "in": "query", "description": str(f.label or name), "schema": _filter_schema(f)}
        for name, f in filters.items()
    ]


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
    writable = {name for name, field in serializer.fields.items() if not field.read_only}
    properties = {name: _json_schema(s) for name, s in mapped["properties"].items() if name in writable}
    required = [] if partial else [name for name in mapped.get("required", []) if name in writable]
    return {"properties": properties, "required": required}


def _json_schema(openapi: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI's field schema as JSON Schema: ``nullable`` becomes a null type, annotations go."""
    schema = {k: v for k, v in openapi.items() if k not in ("readOnly", "writeOnly", "nullable")}
    if openapi.get("nullable") and isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
    if "enum" in schema and openapi.get("nullable"):
        schema["enum"] = [*schema["enum"], None]
    return schema


# -- running the view --------------------------------------------------------------------


def _run(action: Action) -> Callable[..., Any]:
    def run(ctx: ToolContext, **args: Any) -> Any:
        return _answer(_dispatch(action, ctx, args, csrf_checked=action.writes))

    return run


def _dispatch(action: Action, ctx: ToolContext, args: dict[str, Any], *, csrf_checked: bool) -> Response:
    """The view, as the live user's request for it would run."""
    lookup, rest = _split(action, args)
    query = rest if action.method == "GET" else None
    data = rest if action.method != "GET" and action.name != "destroy" else None
    request = live_request(
        ctx.scope, method=action.method, path=_path(action, lookup), query=query, data=data, csrf_checked=csrf_checked
    )
    view = action.viewset.as_view(
        {action.method.lower(): action.handler}, basename=action.basename, detail=action.detail, **action.initkwargs
    )
    return view(request, **({action.lookup: str(lookup)} if action.detail else {}))


def _answer(response: Response) -> Any:
    """A 2xx answer's data as plain JSON; any other answer is the tool's refusal, as the view said it."""
    if 200 <= response.status_code < 300:
        return json.loads(JSONRenderer().render(response.data) or b"null")
    raise _refusal(response)


def _refusal(response: Response) -> Refused:
    data = json.loads(JSONRenderer().render(response.data) or b"null")
    if response.status_code == 400:
        return Refused("invalid_arguments", {"error": "invalid_arguments", "details": data})
    if response.status_code in DENIED_STATUSES or response.status_code == 429:
        code = "throttled" if response.status_code == 429 else DENIED_STATUSES[response.status_code]
        detail = data.get("detail") if isinstance(data, dict) else None
        return Refused("denied", {"error": code, "message": str(detail or code), "status": response.status_code})
    raise RuntimeError(f"the view answered {response.status_code}")


def _split(action: Action, args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    rest = dict(args)
    return (rest.pop(action.lookup, None) if action.detail else None), rest


def _path(action: Action, lookup: Any) -> str:
    """The action's own URL where the site routes the viewset (pagination links use it), else ``/``."""
    try:
        return reverse(action.route, kwargs={action.lookup: lookup} if action.detail else None)
    except NoReverseMatch:
        return "/"


# -- a write's card ---------------------------------------------------------------------


def _prepared(action: Action, ctx: ToolContext, args: dict[str, Any], *, checks: bool) -> tuple[Any, Any, Any]:
    """The view set up as its dispatch would, up to the change itself: with ``checks``, its
    authentication, permissions and throttles, and the serializer bound to the arguments and
    validated; always its object (``get_queryset`` scoping and object permissions run).
    (view, object or None, serializer or None)."""
    lookup, rest = _split(action, args)
    view = action.viewset(basename=action.basename, detail=action.detail, **action.initkwargs)
    view.action_map = {action.method.lower(): action.handler}
    view.args, view.kwargs, view.format_kwarg = (), ({action.lookup: str(lookup)} if action.detail else {}), None
    request = live_request(ctx.scope, method=action.method, path=_path(action, lookup), data=rest, csrf_checked=True)
    view.request = view.initialize_request(request, **view.kwargs)
    view.headers = view.default_response_headers
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
        raise _refusal(view.handle_exception(refused)) from None


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


def _preview(action: Action) -> Callable[..., Any]:
    """What the card shows: for a create or an update, the fields the call sets (an update's old
    value beside the new), editable where a widget fits; for a delete, the object as it is."""

    def preview(ctx: ToolContext, **args: Any) -> dict[str, Any]:
        view, instance, serializer = _prepared(action, ctx, args, checks=True)
        rows = []
        if instance is not None:
            label = str(instance._meta.verbose_name).capitalize()
            rows.append({"name": action.lookup, "label": label, "value": str(instance), "editable": False})
        current = _state(action, view, instance) if instance is not None else {}
        fields = view.get_serializer(instance).fields
        given = current if action.name == "destroy" else _split(action, args)[1]
        # in the serializer's order, not the arguments' (a stored card's arguments come back reordered)
        shown = [(name, given[name]) for name in fields if name in given] + [
            (name, value) for name, value in sorted(given.items()) if name not in fields
        ]
        for name, value in shown:
            field = fields.get(name)
            row: dict[str, Any] = {"name": name, "label": str(getattr(field, "label", None) or name), "value": value}
            if serializer is not None and instance is not None:
                row["old"] = current.get(name)
            kind = _editable_type(field) if serializer is not None and field is not None else None
            row["editable"] = kind is not None
            if kind is not None:
                row["type"] = kind
            if kind == "choice":
                row["choices"] = [[key, str(text)] for key, text in field.choices.items()]
            rows.append(row)
        return {"fields": rows}

    return preview


def _fingerprint(action: Action) -> Callable[..., str]:
    """A digest of the object's current state as the user's serializer shows it: a change made
    since the card was shown refuses the click. An action on no one object (a create) has no
    state to compare; its checks run when the view is dispatched at Confirm."""

    def fingerprint(ctx: ToolContext, **args: Any) -> str:
        if not action.detail:
            return hashlib.sha256(b"null").hexdigest()
        view, instance, _serializer = _prepared(action, ctx, {action.lookup: args.get(action.lookup)}, checks=False)
        return hashlib.sha256(JSONRenderer().render(_state(action, view, instance))).hexdigest()

    return fingerprint


def _state(action: Action, view: GenericViewSet, instance: Any) -> Any:
    """The object as the viewset shows it to this user: through the serializer its ``retrieve``
    would use, since an ``@action``'s own serializer may be one of input alone."""
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
    return view.get_serializer(instance).data


def _editable_type(field: serializers.Field) -> str | None:
    """The widget a card gives a serializer field, or None for one the user edits elsewhere."""
    if isinstance(field, serializers.BooleanField):
        return "boolean"
    if isinstance(field, serializers.ChoiceField) and not isinstance(field, serializers.MultipleChoiceField):
        return "choice"
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
