"""Tools from a site's Django REST Framework viewsets: the site's own views, run as the live user.

``register_viewset`` makes one tool per action. Every call dispatches the real view with a
request of the live session (``agent.tools.requests``) at the path the site's router gives the
action, so authentication, permission classes (object-level too), throttles, ``get_queryset``
scoping, filter backends, versioning and serializer validation all run as they do for the
user's own HTTP request; the view's refusal is the tool's. Reads answer with the response data;
writes become cards whose preview the serializer validated (in a transaction that is undone),
and run only at the user's Confirm, through the view again.

Registration needs no request: what depends on one (the serializer a user's request gets, the
permission classes' answer for this user) is asked when a user's turn needs it.

DRF is an optional extra (``django-agent[drf]``): only this module imports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from django import forms
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied, ValidationError
from django.http import Http404
from django.urls import NoReverseMatch, URLResolver, get_resolver, get_urlconf, reverse
from django.utils.functional import lazy
from django.utils.text import capfirst
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.schemas.openapi import AutoSchema
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.viewsets import GenericViewSet

from ...conf import agent_settings
from ..registry import EMPTY_OBJECT, Refused, Tool, ToolContext, card_value, declared, object_name, registry
from ..requests import live_request

logger = logging.getLogger(__name__)

READS = ("list", "retrieve")
WRITES = {"create": "POST", "update": "PUT", "partial_update": "PATCH", "destroy": "DELETE"}
DETAIL = {"retrieve", "update", "partial_update", "destroy"}
TITLES = {
    "list": _("List %(things)s"),
    "retrieve": _("Read %(thing)s"),
    "create": _("Add %(thing)s"),
    "update": _("Change %(thing)s"),
    "partial_update": _("Change %(thing)s"),
    "destroy": _("Delete %(thing)s"),
}
ACTION_TITLE = _("%(action)s (%(thing)s)")
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
    version: Any = None  # the API version a URL-path or namespace versioning routes the tool's requests to
    path_keywords: tuple[str, ...] = ()  # what an ``@action``'s own ``url_path`` takes ("streams/(?P<kind>...)")

    @property
    def writes(self) -> bool:
        return self.method not in ("GET", "HEAD", "OPTIONS")

    @property
    def url_keywords(self) -> tuple[str, ...]:
        """The arguments the action's URL carries, not its query or body."""
        return ((self.lookup,) if self.detail else ()) + self.path_keywords


def register_viewset(
    viewset_class: type[GenericViewSet],
    *,
    basename: str,
    actions: Iterable[str] | None = None,
    module: str | None = None,
    names: Mapping[str, str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    titles: Mapping[str, Any] | None = None,
    permission: str | None = None,
    fingerprint_fields: Iterable[str] | None = None,
    version: Any = None,
) -> list[Tool]:
    """One tool per action of the viewset (``actions`` picks some): reads for ``list`` and
    ``retrieve``, writes of ``module`` (default: the model's app label) for the rest. An action
    whose renderers offer no JSON (an HTML page) is left out, and ``manage.py check`` names it.

    ``names``, ``descriptions`` and ``titles`` (what the page calls a tool: lazy translations)
    replace, by action, what is made from the viewset, its actions' docstrings and its model's
    names. ``permission`` is a Django permission the user must hold besides what the viewset's
    permission classes ask. ``fingerprint_fields`` names the fields whose change since a card
    was shown makes it stale (default: the serializer's writable fields). ``version`` is the API
    version the tools' requests are routed to under URL-path versioning (default: the
    versioning class's default, else its last allowed version)."""
    found = _actions(viewset_class, basename, version)
    wanted = list(actions) if actions is not None else list(found)
    unknown = sorted(set(wanted) - set(found))
    if unknown:
        raise ImproperlyConfigured(f"{viewset_class.__name__} has no action {', '.join(unknown)}.")
    model = _model_of(viewset_class)
    write_module = module or (model._meta.app_label if model is not None else None)
    chosen = list(fingerprint_fields) if fingerprint_fields is not None else None
    tools = []
    for name in wanted:
        action = found[name]
        if not _speaks_json(action):
            where = f"{viewset_class.__module__}.{viewset_class.__qualname__}.{name}"
            registry.leave_out(where, "its renderers offer no JSON, which is all a tool can read.")
            continue
        if action.writes and not write_module:
            raise ImproperlyConfigured(f"{viewset_class.__name__}: name the module of its writes (module=...).")
        tool = Tool(
            name=(names or {}).get(name, f"{basename}_{name}"),
            kind="write" if action.writes else "read",
            description=(descriptions or {}).get(name) or _description(action, model),
            func=_run(action),
            parameters=_parameters_known_without_request(action),
            permission=permission,
            module=write_module if action.writes else None,
            preview=_preview(action) if action.writes else None,
            fingerprint=_fingerprint(action, chosen) if action.writes else None,
            title=(titles or {}).get(name) or _title(action, model),
            parameters_for=_parameters_for(action),
            available=_available(action),
            tell_result=action.writes,
        )
        tools.append(declared(tool))
    return tools


# -- what the viewset has --------------------------------------------------------------


def _actions(viewset_class: type[GenericViewSet], basename: str, version: Any) -> dict[str, Action]:
    lookup = str(getattr(viewset_class, "lookup_url_kwarg", None) or getattr(viewset_class, "lookup_field", "pk"))
    found = {}
    for name in READS + tuple(WRITES):
        if hasattr(viewset_class, name):
            method, detail = WRITES.get(name, "GET"), name in DETAIL
            route = f"{basename}-{'detail' if detail else 'list'}"
            found[name] = Action(viewset_class, name, method, detail, lookup, basename, name, route, version=version)
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
            version=version,
            path_keywords=tuple(re.compile(extra.url_path).groupindex),
        )
    return found


def _model_of(viewset_class: type[GenericViewSet]) -> Any:
    queryset = getattr(viewset_class, "queryset", None)
    if queryset is not None:
        return queryset.model
    meta = getattr(getattr(viewset_class, "serializer_class", None), "Meta", None)
    return getattr(meta, "model", None)


def _speaks_json(action: Action) -> bool:
    """Whether the action can answer in JSON: among its renderers is one of a JSON media type."""
    renderers = action.initkwargs.get("renderer_classes") or action.viewset.renderer_classes
    return any("json" in str(getattr(renderer, "media_type", "")) for renderer in renderers)


def _title(action: Action, model: Any) -> Any:
    if model is None:
        return None
    meta = model._meta
    template = TITLES.get(action.name)
    if template is None:
        words = str(action.initkwargs.get("name") or action.name.replace("_", " ").capitalize())
        return lazy(lambda: str(ACTION_TITLE) % {"action": words, "thing": meta.verbose_name}, str)()
    return lazy(lambda: str(template) % {"thing": meta.verbose_name, "things": meta.verbose_name_plural}, str)()


def _description(action: Action, model: Any) -> str:
    """The action's own docstring (its first paragraph), else a sentence from the model's names:
    never the viewset's docstring, which is written for the site's developers."""
    handler = getattr(action.viewset, action.name, None)
    own = None if str(getattr(handler, "__module__", "")).startswith("rest_framework") else handler.__doc__
    if own and own.strip():
        return own.strip().split("\n\n")[0]
    what = str(model._meta.verbose_name_plural) if model is not None else action.basename
    card = " The user confirms it on a card first." if action.writes else ""
    phrase = {
        "list": f"List the {what} the user may see; filters, ordering and pages are parameters.",
        "retrieve": f"Read one of the {what} the user may see, by its {action.lookup}.",
        "create": f"Add one of the user's {what}.",
        "update": f"Replace one of the user's {what}, by its {action.lookup}.",
        "partial_update": f"Change some fields of one of the user's {what}, by its {action.lookup}.",
        "destroy": f"Delete one of the user's {what}, by its {action.lookup}.",
    }.get(action.name, f"{action.name.replace('_', ' ').capitalize()} one of the user's {what}.")
    return phrase + card


# -- where the site routes it, and the view set up for a request ---------------------------


_ROUTES: dict[tuple[Any, ...], tuple[str, frozenset[str]] | None] = {}


def _routed(action: Action) -> tuple[str, frozenset[str]] | None:
    """The URL name the site's URLconf gives the action (its namespaces in front) and the keywords
    its pattern takes, or None where the viewset is not routed there. Found once per URLconf."""
    urlconf = get_urlconf() or settings.ROOT_URLCONF
    key = (urlconf, action.viewset, action.route)
    if key not in _ROUTES:
        _ROUTES[key] = next(
            (
                (":".join((*namespaces, pattern.name)), keywords | frozenset(pattern.pattern.regex.groupindex))
                for pattern, namespaces, keywords in _patterns(get_resolver(urlconf).url_patterns, (), frozenset())
                if pattern.name == action.route and getattr(pattern.callback, "cls", None) is action.viewset
            ),
            None,
        )
    return _ROUTES[key]


def _patterns(patterns: Iterable[Any], namespaces: tuple[str, ...], keywords: frozenset[str]) -> Iterator[Any]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = (*namespaces, pattern.namespace) if pattern.namespace else namespaces
            yield from _patterns(pattern.url_patterns, inner, keywords | frozenset(pattern.pattern.regex.groupindex))
        else:
            yield pattern, namespaces, keywords


def _url_kwargs(action: Action, in_url: dict[str, str]) -> dict[str, Any]:
    """The keywords the router's URL gives the view: the arguments it carries (``_split``), and
    the API version where the URL has one."""
    kwargs: dict[str, Any] = dict(in_url)
    routed = _routed(action)
    scheme = action.viewset.versioning_class
    param = getattr(scheme, "version_param", None)
    if routed is not None and param in routed[1]:
        version = action.version if action.version is not None else _default_version(scheme)
        if version is not None:
            kwargs[param] = str(version)
    return kwargs


def _default_version(scheme: Any) -> Any:
    allowed = list(getattr(scheme, "allowed_versions", None) or [])
    default = getattr(scheme, "default_version", None)
    return default if default is not None else (allowed[-1] if allowed else None)


def _path(action: Action, kwargs: dict[str, Any]) -> str:
    """The action's own URL where the site routes the viewset (pagination links and hyperlinked
    fields are built from it), else ``/``."""
    routed = _routed(action)
    if routed is None:
        return "/"
    try:
        return reverse(routed[0], kwargs=kwargs or None)
    except NoReverseMatch:
        return "/"


def _view_for(action: Action, scope: Any, args: dict[str, Any] | None = None, *, data: Any = None) -> Any:
    """The viewset as its dispatch sets it up for this user's request to the action, before its
    checks and its handler run: the request wrapped, the URL's keywords, the action, the version."""
    in_url, _rest = _split(action, args or {})
    kwargs = _url_kwargs(action, in_url)
    request = live_request(scope, method=action.method, path=_path(action, kwargs), data=data, csrf_checked=True)
    view = action.viewset(basename=action.basename, detail=action.detail, **action.initkwargs)
    view.action_map = {action.method.lower(): action.handler}
    view.args, view.kwargs, view.format_kwarg = (), kwargs, None
    view.request = view.initialize_request(request, **kwargs)
    view.headers = view.default_response_headers
    view.request.version, view.request.versioning_scheme = view.determine_version(view.request, **kwargs)
    return view


def _introspected(action: Action) -> GenericViewSet:
    """The viewset as its own code sees it for ``action`` with no request at all."""
    view = action.viewset(
        action=action.handler, request=None, format_kwarg=None, args=(), kwargs={}, **action.initkwargs
    )
    view.action_map = {action.method.lower(): action.handler}
    return view


def _available(action: Action) -> Callable[[Any], bool]:
    """Whether the viewset's permission classes let this user's request to the action through
    ``has_permission`` (its authentication and version too): a tool every call of which would be
    refused is not offered. The object-level checks run with each call."""

    def available(scope: Any) -> bool:
        try:
            view = _view_for(action, scope)
            view.perform_authentication(view.request)
            view.check_permissions(view.request)
        except (APIException, Http404, PermissionDenied):
            return False
        except Exception:
            logger.exception("agent tool of %s.%s: its permission check failed", action.viewset.__name__, action.name)
            return False
        return True

    return available


# -- parameters --------------------------------------------------------------------


def _parameters_known_without_request(action: Action) -> dict[str, Any]:
    """The parameters as far as the viewset's classes tell them with no request: what a listing of
    every tool shows. A viewset whose code needs a request for them gives its lookup alone here;
    each user's turn gets the full ones (``_parameters_for``)."""
    try:
        return _parameters(action, _introspected(action))
    except Exception:
        return _parameters(action, None)


def _parameters_for(action: Action) -> Callable[[Any], dict[str, Any]]:
    """The parameters this user's request gets: built from the serializer (and filters) the
    viewset chooses for it, once per serializer class, so every user of one class shares them."""
    built: dict[Any, dict[str, Any]] = {}

    def parameters_for(scope: Any) -> dict[str, Any]:
        try:
            view = _view_for(action, scope)
            key = (get_language(), _schema_key(action, view))  # labels and help texts are in the user's language
            if key not in built:
                built[key] = _parameters(action, view)
            return built[key]
        except Exception:
            logger.exception("agent tool of %s.%s: its parameters failed", action.viewset.__name__, action.name)
            return _parameters_known_without_request(action)

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


# -- running the view --------------------------------------------------------------------


def _run(action: Action) -> Callable[..., Any]:
    def run(ctx: ToolContext, **args: Any) -> Any:
        return _answer(_dispatch(action, ctx, args, csrf_checked=action.writes))

    return run


def _dispatch(action: Action, ctx: ToolContext, args: dict[str, Any], *, csrf_checked: bool) -> Response:
    """The view, as the live user's request for it would run, at the path the router gives it."""
    in_url, rest = _split(action, args)
    query = rest if action.method == "GET" else None
    data = rest if action.method != "GET" and action.name != "destroy" else None
    kwargs = _url_kwargs(action, in_url)
    request = live_request(
        ctx.scope, method=action.method, path=_path(action, kwargs), query=query, data=data, csrf_checked=csrf_checked
    )
    view = action.viewset.as_view(
        {action.method.lower(): action.handler}, basename=action.basename, detail=action.detail, **action.initkwargs
    )
    return view(request, **kwargs)


def _answer(response: Response) -> Any:
    """A 2xx answer's data as plain JSON; any other answer is the tool's refusal, as the view said it."""
    if 200 <= response.status_code < 300:
        return json.loads(JSONRenderer().render(response.data) or b"null")
    raise _refusal(response)


def _refusal(response: Response) -> Refused:
    """The view's 4xx as the tool's refusal: 400 and 422 are arguments the model can correct, any
    other (401, 403, 404, a 409 of the site's own...) is ``denied`` with the view's words. A 5xx
    is the view's failure, not a refusal."""
    data = json.loads(JSONRenderer().render(response.data) or b"null")
    status = response.status_code
    if status in (400, 422):
        return Refused("invalid_arguments", {"error": "invalid_arguments", "details": data})
    if 400 <= status < 500:
        code = "throttled" if status == 429 else DENIED_STATUSES.get(status, "refused")
        detail = data.get("detail") if isinstance(data, dict) else None
        return Refused("denied", {"error": code, "message": str(detail or code), "status": status})
    raise RuntimeError(f"the view answered {status}")


def _split(action: Action, args: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """The arguments the action's URL carries (its lookup, its ``url_path``'s keywords), and the
    rest: its query or its body."""
    rest = dict(args)
    return {name: str(rest.pop(name)) for name in action.url_keywords if name in rest}, rest


# -- a write's card ---------------------------------------------------------------------


def _prepared(action: Action, ctx: ToolContext, args: dict[str, Any], *, checks: bool) -> tuple[Any, Any, Any]:
    """The view set up as its dispatch would, up to the change itself: with ``checks``, its
    authentication, permissions and throttles, and the serializer bound to the arguments and
    validated; always its object (``get_queryset`` scoping and object permissions run).
    (view, object or None, serializer or None)."""
    _in_url, rest = _split(action, args)
    view = _view_for(action, ctx.scope, args, data=rest)
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
            label = capfirst(str(instance._meta.verbose_name))
            rows.append({"name": action.lookup, "label": label, "value": object_name(instance), "editable": False})
        current = _state(action, view, instance) if instance is not None else {}
        fields = view.get_serializer(instance).fields
        given = current if action.name == "destroy" else _split(action, args)[1]
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


def _fingerprint(action: Action, chosen: list[str] | None) -> Callable[..., str]:
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
