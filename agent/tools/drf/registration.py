"""``register_viewset``: one tool per action of a viewset, named and worded from the viewset, its
actions' docstrings and its model's names, with its run, its parameters and its card from the
modules beside it. The one part a site calls."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _
from rest_framework.viewsets import GenericViewSet

from ..registry import Tool, declared, registry
from .actions import Action, actions_of
from .cards import tool_fingerprint, tool_preview
from .dispatch import tool_available, tool_run
from .parameters import parameters_known_without_request, tool_parameters_for

TITLES = {
    "list": _("List %(things)s"),
    "retrieve": _("Read %(thing)s"),
    "create": _("Add %(thing)s"),
    "update": _("Change %(thing)s"),
    "partial_update": _("Change %(thing)s"),
    "destroy": _("Delete %(thing)s"),
}
ACTION_TITLE = _("%(action)s (%(thing)s)")


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
    found = actions_of(viewset_class, basename, version)
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
            func=tool_run(action),
            parameters=parameters_known_without_request(action),
            permission=permission,
            module=write_module if action.writes else None,
            preview=tool_preview(action) if action.writes else None,
            fingerprint=tool_fingerprint(action, chosen) if action.writes else None,
            title=(titles or {}).get(name) or _title(action, model),
            parameters_for=tool_parameters_for(action),
            available=tool_available(action),
            tell_result=action.writes,
        )
        tools.append(declared(tool))
    return tools


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
