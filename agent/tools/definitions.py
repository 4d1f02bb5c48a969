"""How every tool reads to a model: its definition, made small enough to send with each request.

A site's schema is written for validation, its docstrings for developers. What the model gets
keeps the meaning and drops the bulk: an enum of more than ``TOOL_ENUM_MAX`` values becomes a
string whose description names the first ones and their count (the tool's full schema still
validates every call, and a refusal of such a value names at most that many); descriptions are
plain words on one line (a docstring's indentation and line breaks go), a tool's cut to
``TOOL_DESCRIPTION_CHARS`` and a parameter's to ``TOOL_PARAMETER_DESCRIPTION_CHARS``. The rules
hold for every tool, hand-written or made from a viewset or a form, at this one place.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from django.utils.translation import gettext as _

from ..core.conf import agent_settings

_SPACES = re.compile(r"\s+")
_VALUES = ("enum", "const", "default", "examples")  # data, not schemas: never walked into


def readable(description: str, parameters: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The description and the parameters as the model is sent them."""
    return _words(description, agent_settings.TOOL_DESCRIPTION_CHARS), _schema(parameters)


def enum_refusal(value: Any, allowed: list[Any]) -> str:
    """What a schema's refusal of ``value`` says: the allowed values, or of more than
    ``TOOL_ENUM_MAX`` the ones closest to ``value`` (at most that many), so the model finds the
    right one from its guess."""
    limit = agent_settings.TOOL_ENUM_MAX
    if len(allowed) <= limit:
        return _("%(value)s is not one of %(allowed)s") % {"value": repr(value), "allowed": repr(allowed)}
    texts = {str(choice): choice for choice in allowed if choice is not None}
    close = difflib.get_close_matches(str(value), list(texts), n=limit, cutoff=0.4) or list(texts)[:limit]
    return _("%(value)s is not one of the %(count)d allowed values; the closest: %(close)s") % {
        "value": repr(value),
        "count": len(allowed),
        "close": ", ".join(close),
    }


def _schema(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    shown = {key: value if key in _VALUES else _schema(value) for key, value in schema.items()}
    if isinstance(shown.get("description"), str):
        shown["description"] = _words(shown["description"], agent_settings.TOOL_PARAMETER_DESCRIPTION_CHARS)
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) > agent_settings.TOOL_ENUM_MAX:
        shown.pop("enum")
        shown["type"] = ["string", "null"] if None in enum else "string"
        shown["description"] = _described(shown.get("description") or "", [v for v in enum if v is not None])
    return shown


def _described(description: str, values: list[Any]) -> str:
    """A big enum's description: the field's own words, the count and the first values that fit
    in ``TOOL_PARAMETER_DESCRIPTION_CHARS``, and how to find the others (a wrong guess is refused
    with the closest values)."""
    limit = agent_settings.TOOL_PARAMETER_DESCRIPTION_CHARS
    words = {"count": len(values)}
    tail = str(_("a value not among them is refused with the closest ones."))
    first: list[str] = []
    for value in map(str, values):
        text = _("One of %(count)d values, such as %(first)s; ") % {**words, "first": ", ".join([*first, value])}
        if len(f"{description} {text}{tail}".strip()) > limit and first:
            break
        first.append(value)
    said = _("One of %(count)d values, such as %(first)s; ") % {**words, "first": ", ".join(first)} + tail
    return f"{description} {said}".strip()


def _words(text: str, limit: int) -> str:
    """``text`` on one line, its spaces plain, cut at a sentence's end within ``limit`` if it can be."""
    words = _SPACES.sub(" ", text).strip()
    if len(words) <= limit:
        return words
    cut = words[:limit]
    end = cut.rfind(". ")
    return cut[: end + 1] if end > limit // 2 else cut.rstrip() + "…"
