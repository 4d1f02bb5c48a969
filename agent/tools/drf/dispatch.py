"""An action's view run as the live user: where the site's URLconf routes it, the view set up as
its dispatch sets it up for the user's request, the tool's call with its answer or the view's
refusal, and whether the permission classes let the user's request through at all. The
parameters and the cards set the view up through it."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterable, Iterator

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.urls import NoReverseMatch, URLResolver, get_resolver, get_urlconf, reverse
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from ..registry import Refused, ToolContext
from ..requests import live_request
from .actions import Action, split_arguments

logger = logging.getLogger(__name__)

DENIED_STATUSES = {401: "not_authenticated", 403: "permission_denied", 404: "not_found", 405: "not_allowed"}
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
    """The keywords the router's URL gives the view: the arguments it carries
    (``split_arguments``), and the API version where the URL has one."""
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


def view_for(action: Action, scope: Any, args: dict[str, Any] | None = None, *, data: Any = None) -> Any:
    """The viewset as its dispatch sets it up for this user's request to the action, before its
    checks and its handler run: the request wrapped, the URL's keywords, the action, the version."""
    in_url, _rest = split_arguments(action, args or {})
    kwargs = _url_kwargs(action, in_url)
    request = live_request(scope, method=action.method, path=_path(action, kwargs), data=data, csrf_checked=True)
    view = action.viewset(basename=action.basename, detail=action.detail, **action.initkwargs)
    view.action_map = {action.method.lower(): action.handler}
    view.args, view.kwargs, view.format_kwarg = (), kwargs, None
    view.request = view.initialize_request(request, **kwargs)
    view.headers = view.default_response_headers
    view.request.version, view.request.versioning_scheme = view.determine_version(view.request, **kwargs)
    return view


def tool_available(action: Action) -> Callable[[Any], bool]:
    """Whether the viewset's permission classes let this user's request to the action through
    ``has_permission`` (its authentication and version too): a tool every call of which would be
    refused is not offered. The object-level checks run with each call."""

    def available(scope: Any) -> bool:
        try:
            view = view_for(action, scope)
            view.perform_authentication(view.request)
            view.check_permissions(view.request)
        except (APIException, Http404, PermissionDenied):
            return False
        except Exception:
            logger.exception("agent tool of %s.%s: its permission check failed", action.viewset.__name__, action.name)
            return False
        return True

    return available


def tool_run(action: Action) -> Callable[..., Any]:
    """The tool's function: the view dispatched as the user's request, its answer's data."""

    def run(ctx: ToolContext, **args: Any) -> Any:
        return _answer(_dispatch(action, ctx, args, csrf_checked=action.writes))

    return run


def _dispatch(action: Action, ctx: ToolContext, args: dict[str, Any], *, csrf_checked: bool) -> Response:
    """The view, as the live user's request for it would run, at the path the router gives it."""
    in_url, rest = split_arguments(action, args)
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
    raise refusal(response)


def refusal(response: Response) -> Refused:
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
