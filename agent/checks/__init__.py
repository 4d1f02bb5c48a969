"""System checks for ``settings.AGENT`` and the site around the app, each with its own id.

``manage.py check --tag agent`` runs them all; ``AgentConfig.ready`` imports the modules that
register them: ``settings`` (``settings.AGENT`` and what it names), ``site`` (the site's wiring
around the app: its websocket route, its middleware, its login page), ``services`` (the channel
layer, Redis and Celery the app runs on) and ``extras`` (the optional libraries a setting asks for).
Each mistake a new site makes when it wires the app in gets its own id and a hint that says what
to change. What they share is here.
"""

from __future__ import annotations

from typing import TypeGuard

from django.utils.module_loading import import_string

TAG = "agent"


def is_subclass_at(path: object, base: type) -> TypeGuard[str]:
    """Whether ``path`` is the dotted path of a subclass of ``base``; False when it does not import."""
    if not isinstance(path, str):
        return False
    try:
        found = import_string(path)
    except ImportError:  # other checks, or the first request, say so
        return False
    return isinstance(found, type) and issubclass(found, base)
