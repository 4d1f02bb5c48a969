"""A site with many tools: 20 kinds of record of a baby's day, five tools each (list, read, add,
change, delete), titles in English and Russian as a site's catalogue would translate them."""

from __future__ import annotations

from typing import Any, Callable

from django.utils import translation
from django.utils.functional import lazy

THINGS = {
    "feeding": "кормление",
    "sleep": "сон",
    "diaper_change": "смена подгузника",
    "temperature": "температура",
    "weight": "вес",
    "height": "рост",
    "note": "заметка",
    "timer": "таймер",
    "tummy_time": "время на животике",
    "pumping": "сцеживание",
    "tag": "метка",
    "child": "ребёнок",
    "bmi": "индекс массы тела",
    "head_circumference": "окружность головы",
    "medication": "лекарство",
    "bath": "купание",
    "vaccine": "прививка",
    "doctor_visit": "визит к врачу",
    "milestone": "достижение",
    "photo": "фотография",
}
ACTIONS = {
    "list": ("List {}s", "Список: {}", "List the {}s the user may see; filters and pages are parameters."),
    "retrieve": ("Show a {}", "Показать: {}", "Read one {} the user may see, by its id."),
    "create": ("Add a {}", "Добавить: {}", "Record a new {}. The user confirms it on a card first."),
    "update": ("Change a {}", "Изменить: {}", "Change some fields of one {}. The user confirms it on a card first."),
    "destroy": ("Delete a {}", "Удалить: {}", "Delete one {}, by its id. The user confirms it on a card first."),
}
FIELDS = {
    "child": {"type": "integer", "description": "The child's id."},
    "start": {"type": "string", "format": "date-time", "description": "When it started."},
    "end": {"type": "string", "format": "date-time", "description": "When it ended."},
    "notes": {"type": "string", "maxLength": 1000, "description": "Free text about it."},
}
LIST_FIELDS = {
    "child": {"type": "integer", "description": "Only the records of this child."},
    "date_min": {"type": "string", "format": "date-time", "description": "Only records from this time on."},
    "date_max": {"type": "string", "format": "date-time", "description": "Only records until this time."},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of results to return per page."},
    "offset": {"type": "integer", "minimum": 0, "description": "The initial index from which to return the results."},
}


def _title(english: str, russian: str) -> Any:
    return lazy(lambda: russian if translation.get_language() == "ru" else english, str)()


def declare_catalogue(declare: Callable[..., Any], run: Callable[..., Any] | None = None) -> list[str]:
    """Declare the 100 tools (reads only, so no module must let sessions write); their names."""
    names = []
    for thing, russian in THINGS.items():
        words = thing.replace("_", " ")
        for action, (title, title_ru, description) in ACTIONS.items():
            properties = dict(LIST_FIELDS if action == "list" else FIELDS)
            if action in ("retrieve", "update", "destroy"):
                properties = {"id": {"type": "integer", "description": f"The {words}'s id."}}
                properties.update(FIELDS if action == "update" else {})
            name = f"{thing}_{action}"
            declare(
                run or (lambda ctx, **args: {"ok": True}),
                name=name,
                title=_title(title.format(words), title_ru.format(russian)),
                description=description.format(words),
                parameters={"type": "object", "properties": properties, "additionalProperties": False},
            )
            names.append(name)
    return names
