"""A viewset's actions as a tool calls them and as the site's router routes them: the one record
every other part of the DRF tools reads (which actions a viewset has, which read and which write,
what each one's URL carries)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from rest_framework.viewsets import GenericViewSet

READS = ("list", "retrieve")
WRITES = {"create": "POST", "update": "PUT", "partial_update": "PATCH", "destroy": "DELETE"}
DETAIL = {"retrieve", "update", "partial_update", "destroy"}


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


def actions_of(viewset_class: type[GenericViewSet], basename: str, version: Any) -> dict[str, Action]:
    """The viewset's actions by name: the router's own (``list``, ``create``, ...) it has, and its
    ``@action``s, each as the router routes it."""
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


def split_arguments(action: Action, args: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """The arguments the action's URL carries (its lookup, its ``url_path``'s keywords), and the
    rest: its query or its body."""
    rest = dict(args)
    return {name: str(rest.pop(name)) for name in action.url_keywords if name in rest}, rest
