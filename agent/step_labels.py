"""How the assistant's steps read to people, whoever shows them (the page, Telegram): a tool's title
and a card's labelled fields, in the active language."""

from __future__ import annotations

import json
from typing import Any

from django.utils.translation import gettext

from .confirmations import editable_fields
from .tools.registry import FIND_TOOLS, registry


def tool_title(name: Any) -> str:
    """What a person calls a tool, in the active language: its declared title, else its name."""
    if name == FIND_TOOLS:
        return gettext("Look for tools")
    tool = registry.get(name) if isinstance(name, str) else None
    return tool.display_title() if tool is not None else str(name or "?")


def confirmation_fields(name: Any, preview: Any) -> list[dict[str, str]]:
    """A card's preview as labelled rows, empty values left out.

    With declared labels, only the labelled keys show, in the labels' order, so an
    internal key never reaches the page; without them, every key shows as it is.
    """
    if not isinstance(preview, dict):
        text = _field_text(preview)
        return [{"key": "", "label": "", "value": text}] if text else []
    if isinstance(preview.get("fields"), list):
        return _field_rows(preview)
    tool = registry.get(name) if isinstance(name, str) else None
    labels = {key: str(label) for key, label in tool.labels.items()} if tool is not None and tool.labels else None
    keys = list(labels) if labels is not None else list(preview)
    rows = []
    for key in keys:
        text = _field_text(preview.get(key))
        if text:
            rows.append({"key": key, "label": labels[key] if labels is not None else key, "value": text})
    return rows


def _field_rows(preview: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a preview that lists its fields: an update's old value beside the new, and for
    each field the user may change, its value as data, its type and its choices (the page's widget)."""
    editable = editable_fields(preview)
    rows = []
    for field in preview["fields"]:
        if not isinstance(field, dict) or not isinstance(field.get("name"), str):
            continue
        name = field["name"]
        row: dict[str, Any] = {
            "key": name,
            "label": str(field.get("label") or name),
            "value": _shown(field.get("value")),
        }
        if "old" in field:
            row["old"] = _shown(field.get("old"))
        if name in editable:
            row.update(editable=True, type=field["type"], raw=field.get("value"))
            if isinstance(field.get("choices"), list):
                row["choices"] = [
                    [c[0], str(c[1])] for c in field["choices"] if isinstance(c, (list, tuple)) and len(c) == 2
                ]
        elif not row["value"] and not row.get("old"):
            continue
        rows.append(row)
    return rows


def _shown(value: Any) -> str:
    """A field's value as a person reads it: yes and no in their language."""
    if isinstance(value, bool):
        return gettext("Yes") if value else gettext("No")
    return _field_text(value)


def _field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip() and value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if not value:
        return ""
    return json.dumps(value, ensure_ascii=False)
