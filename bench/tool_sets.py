"""Two public DRF apps' tool sets, as ``agent.tools.drf.register_viewset`` makes them, and requests
labelled with the tool that answers them.

The apps: a baby tracker's API (14 model viewsets: BMI, diaper changes, children, feedings, head
circumference, height, notes, pumping, sleep, tags, temperature, timers with a ``restart`` action,
tummy time, weight) and the DRF tutorial's snippets (a model viewset whose ``highlight`` answers HTML
only, so it is no tool, and a read-only viewset of users). Names, titles, descriptions and parameters
follow what ``register_viewset`` builds from such viewsets: ``<basename>_<action>``, a title from the
model's verbose name ("List feedings"; in Russian as the site's catalogue gives it), a description from
the action, the serializer's writable fields, the filters, ordering and pagination of ``list``.
Nothing here is the apps' code: only the shape of what they declare.
"""

from __future__ import annotations

from typing import Any

from django.utils import translation
from django.utils.functional import lazy
from django.utils.translation import gettext

from agent.tools.registry import Tool

# (basename, verbose name, plural, Russian, Russian plural, lookup, writable fields, filters)
CHILD = {"child": {"type": ["integer", "string"], "description": "Required unless a Timer value is provided."}}
TIMED = {
    "start": {"type": "string", "format": "date-time", "description": "Required unless a Timer value is provided."},
    "end": {"type": "string", "format": "date-time", "description": "Required unless a Timer value is provided."},
    "timer": {
        "type": ["integer", "string", "null"],
        "description": "May be used in place of the Start, End, and/or Child values.",
    },
}
NOTES = {"notes": {"type": ["string", "null"]}}
TAGS = {"tags": {"type": "array", "items": {"type": "string"}}}
DATE = {"date": {"type": "string", "format": "date"}}
TIME = {"time": {"type": "string", "format": "date-time"}}


def _number(name: str) -> dict[str, Any]:
    return {name: {"type": "number"}}


def _time_filters() -> dict[str, Any]:
    return {
        "child": {"type": ["integer", "string"], "description": "child"},
        "date": {"type": "string", "format": "date-time", "description": "DateTime"},
        "date_max": {"type": "string", "format": "date-time", "description": "Max. DateTime"},
        "date_min": {"type": "string", "format": "date-time", "description": "Min. DateTime"},
        "tags": {"type": "string", "description": "A list of tag names, comma separated"},
    }


def _span_filters() -> dict[str, Any]:
    span = {"child": {"type": ["integer", "string"], "description": "child"}}
    for edge, label in (("start", "Start"), ("end", "End")):
        span[edge] = {"type": "string", "format": "date-time", "description": f"{label} DateTime"}
        span[f"{edge}_max"] = {"type": "string", "format": "date-time", "description": f"Max. {label} DateTime"}
        span[f"{edge}_min"] = {"type": "string", "format": "date-time", "description": f"Min. {label} DateTime"}
    return span


def _date_filters() -> dict[str, Any]:
    return {
        "child": {"type": ["integer", "string"], "description": "child"},
        "date": {"type": "string", "format": "date", "description": "date"},
    }


FEEDING_TYPES = ["breast milk", "formula", "fortified breast milk", "solid food"]
FEEDING_METHODS = ["bottle", "left breast", "right breast", "both breasts", "parent fed", "self fed"]
COLORS = ["black", "brown", "green", "yellow"]

BABY = [
    ("bmi", "BMI", "BMI", "ИМТ", "ИМТ", "id", {**CHILD, **_number("bmi"), **DATE, **NOTES, **TAGS}, _date_filters()),
    (
        "diaperchange",
        "diaper change",
        "diaper changes",
        "смена подгузника",
        "смены подгузника",
        "id",
        {
            **CHILD,
            **TIME,
            "wet": {"type": "boolean"},
            "solid": {"type": "boolean"},
            "color": {"enum": COLORS},
            **_number("amount"),
            **NOTES,
            **TAGS,
        },
        {
            **_time_filters(),
            "wet": {"type": "boolean", "description": "wet"},
            "solid": {"type": "boolean", "description": "solid"},
            "color": {"enum": COLORS, "description": "color"},
            "amount": {"type": "number", "description": "amount"},
        },
    ),
    (
        "child",
        "child",
        "children",
        "ребёнок",
        "дети",
        "slug",
        {
            "first_name": {"type": "string", "maxLength": 255},
            "last_name": {"type": "string", "maxLength": 255},
            "birth_date": {"type": "string", "format": "date"},
            "birth_time": {"type": ["string", "null"], "format": "time"},
        },
        {
            name: {"type": "string", "description": name.replace("_", " ")}
            for name in ("id", "first_name", "last_name", "slug", "birth_date", "birth_time")
        },
    ),
    (
        "feeding",
        "feeding",
        "feedings",
        "кормление",
        "кормления",
        "id",
        {
            **CHILD,
            **TIMED,
            "type": {"enum": FEEDING_TYPES},
            "method": {"enum": FEEDING_METHODS},
            **_number("amount"),
            **NOTES,
            **TAGS,
        },
        {
            **_span_filters(),
            "type": {"enum": FEEDING_TYPES, "description": "type"},
            "method": {"enum": FEEDING_METHODS, "description": "method"},
            "tags": {"type": "string", "description": "A list of tag names, comma separated"},
        },
    ),
    (
        "headcircumference",
        "head circumference",
        "head circumference",
        "окружность головы",
        "окружность головы",
        "id",
        {**CHILD, **_number("head_circumference"), **DATE, **NOTES, **TAGS},
        _date_filters(),
    ),
    (
        "height",
        "height",
        "height",
        "рост",
        "рост",
        "id",
        {**CHILD, **_number("height"), **DATE, **NOTES, **TAGS},
        _date_filters(),
    ),
    (
        "note",
        "note",
        "notes",
        "заметка",
        "заметки",
        "id",
        {**CHILD, "note": {"type": "string"}, **TIME, **TAGS},
        _time_filters(),
    ),
    (
        "pumping",
        "pumping",
        "pumping",
        "сцеживание",
        "сцеживания",
        "id",
        {**CHILD, **_number("amount"), **TIMED, **NOTES, **TAGS},
        _span_filters(),
    ),
    (
        "sleep",
        "sleep",
        "sleep",
        "сон",
        "сон",
        "id",
        {**CHILD, **TIMED, "nap": {"type": ["boolean", "null"]}, **NOTES, **TAGS},
        {**_span_filters(), "tags": {"type": "string", "description": "A list of tag names, comma separated"}},
    ),
    (
        "tag",
        "tag",
        "tags",
        "метка",
        "метки",
        "slug",
        {"name": {"type": "string", "maxLength": 255}, "color": {"type": "string", "maxLength": 32}},
        {
            "last_used": {"type": "string", "description": "last used"},
            "name": {"type": "string", "description": "name"},
        },
    ),
    (
        "temperature",
        "temperature",
        "temperature",
        "температура",
        "температура",
        "id",
        {**CHILD, **_number("temperature"), **TIME, **NOTES, **TAGS},
        _time_filters(),
    ),
    (
        "timer",
        "timer",
        "timers",
        "таймер",
        "таймеры",
        "id",
        {
            **CHILD,
            "name": {"type": ["string", "null"], "maxLength": 255},
            "start": {"type": "string", "format": "date-time"},
            "user": {"type": ["integer", "string", "null"]},
        },
        {
            **_span_filters(),
            "name": {"type": "string", "description": "name"},
            "user": {"type": "string", "description": "user"},
        },
    ),
    (
        "tummytime",
        "tummy time",
        "tummy time",
        "время на животе",
        "время на животе",
        "id",
        {**CHILD, **TIMED, "milestone": {"type": "string", "maxLength": 255}, **TAGS},
        {**_span_filters(), "tags": {"type": "string", "description": "A list of tag names, comma separated"}},
    ),
    (
        "weight",
        "weight",
        "weight",
        "вес",
        "вес",
        "id",
        {**CHILD, **_number("weight"), **DATE, **NOTES, **TAGS},
        _date_filters(),
    ),
]

LEXERS = ["abap", "abnf", "actionscript", "ada", "agda", "apl", "bash", "c", "clojure", "cpp", "csharp", "css"]
SNIPPETS = [
    (
        "snippet",
        "snippet",
        "snippets",
        "фрагмент кода",
        "фрагменты кода",
        "id",
        {
            "title": {"type": "string", "maxLength": 100},
            "code": {"type": "string"},
            "linenos": {"type": "boolean"},
            "language": {
                "type": "string",
                "description": f"One of 598 values, such as {', '.join(LEXERS)}.",
            },
            "style": {"type": "string", "description": "One of 48 values, such as abap, algol, algol_nu, arduino."},
        },
        {},
    ),
]
USERS = ("user", "user", "users", "пользователь", "пользователи", "id")

ACTIONS = {
    "list": (
        "List %(things)s",
        "List the {things} the user may see; filters, search, ordering and pages are parameters.",
    ),
    "retrieve": ("Read %(thing)s", "Read one of the {things} the user may see, by its {lookup}."),
    "create": ("Create %(thing)s", "Create one of the user's {things}. The user confirms it on a card first."),
    "update": (
        "Change %(thing)s",
        "Replace one of the user's {things}, by its {lookup}. The user confirms it on a card first.",
    ),
    "partial_update": (
        "Change %(thing)s",
        "Change some fields of one of the user's {things}. The user confirms it on a card first.",
    ),
    "destroy": (
        "Delete %(thing)s",
        "Delete one of the user's {things}, by its {lookup}. The user confirms it on a card first.",
    ),
}
PAGES = {
    "limit": {"type": "integer", "description": "Number of results to return per page."},
    "offset": {"type": "integer", "description": "The initial index from which to return the results."},
}


def _title(template: str, english: tuple[str, str], russian: tuple[str, str]) -> Any:
    def title() -> str:
        thing, things = russian if translation.get_language() == "ru" else english
        return gettext(template) % {"thing": thing, "things": things}

    return lazy(title, str)()


def _tools(row: tuple[Any, ...], actions: list[str]) -> list[Tool]:
    basename, thing, things, thing_ru, things_ru, lookup, fields, filters = row
    tools = []
    for action in actions:
        template, description = ACTIONS[action]
        properties: dict[str, Any] = {}
        if action in ("retrieve", "update", "partial_update", "destroy"):
            properties[lookup] = {"type": ["integer", "string"], "description": f"The object's {lookup}."}
        if action == "list":
            ordering = [f for f in filters if f in ("date", "time", "start", "end", "name")] or ["id"]
            properties.update(filters)
            properties["ordering"] = {
                "enum": ordering + [f"-{f}" for f in ordering],
                "description": "Which field to use when ordering the results.",
            }
            properties.update(PAGES)
        elif action in ("create", "update", "partial_update"):
            properties.update(fields)
        tools.append(
            Tool(
                name=f"{basename}_{action}",
                kind="read",  # offered to a session whatever modules may write: the bench ranks, it runs nothing
                description=description.format(things=things, lookup=lookup),
                func=lambda ctx, **args: None,
                parameters={"type": "object", "properties": properties, "additionalProperties": False},
                title=_title(template, (thing, things), (thing_ru, things_ru)),
            )
        )
    return tools


def drf_apps() -> list[Tool]:
    """The two apps' 93 tools: the baby tracker's 85, the snippets tutorial's 8."""
    crud = list(ACTIONS)
    tools = [tool for row in BABY for tool in _tools(row, crud)]
    tools.append(
        Tool(
            name="timer_restart",
            kind="read",
            description="The restart action on the user's timers.",
            func=lambda ctx, **args: None,
            parameters={
                "type": "object",
                "properties": {"id": {"type": ["integer", "string"], "description": "The object's id."}},
                "additionalProperties": False,
            },
            title=_title("Restart %(thing)s", ("timer", "timers"), ("таймер", "таймеры")),
        )
    )
    tools += [tool for row in SNIPPETS for tool in _tools(row, crud)]
    tools += _tools((*USERS, {}, {"username": {"type": "string", "description": "username"}}), ["list", "retrieve"])
    return tools


WORDS = """invoice order shipment supplier warehouse product price discount coupon refund payment customer
    ticket project task milestone sprint release incident alert report budget expense employee shift
    contract lead campaign newsletter subscriber survey lesson course exam grade room booking""".split()
KINDS = "draft archived recurring shared internal".split()


def synthetic(count: int) -> list[Tool]:
    """``count`` more tools of a made-up back office (invoices, tickets, bookings...), for size and time."""
    rows = []
    for kind in KINDS:
        for word in WORDS:
            name = f"{kind}_{word}"
            thing = f"{kind} {word}"
            fields = {word: {"type": "string", "maxLength": 200}, "note": {"type": "string"}, **DATE}
            rows.append((name, thing, f"{thing}s", thing, f"{thing}s", "id", fields, _date_filters()))
    tools = [tool for row in rows for tool in _tools(row, list(ACTIONS))]
    return tools[:count]


# (request, language, the tools that answer it: any of them is right)
LABELLED: list[tuple[str, str, set[str]]] = [
    ("How many times did Emma eat today?", "en", {"feeding_list"}),
    ("Log a bottle feeding of 120 ml that just finished", "en", {"feeding_create"}),
    ("Show me the last feeding", "en", {"feeding_list", "feeding_retrieve"}),
    ("The feeding at 3pm was formula, not breast milk, fix it", "en", {"feeding_partial_update", "feeding_update"}),
    ("Delete the feeding I entered by mistake", "en", {"feeding_destroy"}),
    ("Record a wet diaper", "en", {"diaperchange_create"}),
    ("How many diaper changes were there yesterday?", "en", {"diaperchange_list"}),
    ("Was the last poop green?", "en", {"diaperchange_list"}),
    ("Remove the diaper change from this morning", "en", {"diaperchange_destroy"}),
    ("She fell asleep at 1pm, note the nap", "en", {"sleep_create"}),
    ("How long did he sleep last night?", "en", {"sleep_list"}),
    ("Change the end of the last sleep to 6:30", "en", {"sleep_partial_update", "sleep_update"}),
    ("Her temperature is 37.8 now", "en", {"temperature_create"}),
    ("What were the temperature readings this week?", "en", {"temperature_list"}),
    ("Add today's weight: 6.2 kg", "en", {"weight_create"}),
    ("How has her weight changed this month?", "en", {"weight_list"}),
    ("He is 64 cm tall now, save it", "en", {"height_create"}),
    ("Show the height measurements", "en", {"height_list"}),
    ("Record head circumference 41 cm", "en", {"headcircumference_create"}),
    ("What is his BMI?", "en", {"bmi_list", "bmi_retrieve"}),
    ("Add a note that she rolled over today", "en", {"note_create"}),
    ("Find my notes about the doctor", "en", {"note_list"}),
    ("Start a timer for tummy time", "en", {"timer_create"}),
    ("Restart the feeding timer", "en", {"timer_restart"}),
    ("Which timers are running?", "en", {"timer_list"}),
    ("Log 10 minutes of tummy time", "en", {"tummytime_create"}),
    ("How much tummy time this week?", "en", {"tummytime_list"}),
    ("I pumped 90 ml at 7am", "en", {"pumping_create"}),
    ("Show the pumping sessions", "en", {"pumping_list"}),
    ("Add our second child, Leo, born 2024-03-02", "en", {"child_create"}),
    ("List the children", "en", {"child_list"}),
    ("Create a tag called teething", "en", {"tag_create"}),
    ("Rename the tag 'sick' to 'ill'", "en", {"tag_partial_update", "tag_update"}),
    ("Save this Python code as a snippet titled quicksort", "en", {"snippet_create"}),
    ("Show my code snippets", "en", {"snippet_list"}),
    ("Delete the snippet called test", "en", {"snippet_destroy"}),
    ("Change the language of snippet 4 to python", "en", {"snippet_partial_update", "snippet_update"}),
    ("Who are the users of the site?", "en", {"user_list"}),
    ("Open snippet number 12", "en", {"snippet_retrieve"}),
    ("Correct the weight entry from Monday to 5.9 kg", "en", {"weight_partial_update", "weight_update"}),
    ("Сколько раз Эмма ела сегодня?", "ru", {"feeding_list"}),
    ("Добавь кормление из бутылочки, 120 мл", "ru", {"feeding_create"}),
    ("Покажи последнее кормление", "ru", {"feeding_list", "feeding_retrieve"}),
    ("Удали кормление, которое я внесла по ошибке", "ru", {"feeding_destroy"}),
    ("Исправь последнее кормление: это была смесь", "ru", {"feeding_partial_update", "feeding_update"}),
    ("Запиши смену подгузника", "ru", {"diaperchange_create"}),
    ("Сколько было смен подгузника вчера?", "ru", {"diaperchange_list"}),
    ("Удали смену подгузника от утра", "ru", {"diaperchange_destroy"}),
    ("Запиши сон с часу дня", "ru", {"sleep_create"}),
    ("Покажи сон за прошлую ночь", "ru", {"sleep_list"}),
    ("Температура сейчас 37,8, запиши", "ru", {"temperature_create"}),
    ("Покажи температуру за неделю", "ru", {"temperature_list"}),
    ("Добавь вес 6,2 кг", "ru", {"weight_create"}),
    ("Как менялся вес в этом месяце?", "ru", {"weight_list"}),
    ("Запиши рост 64 см", "ru", {"height_create"}),
    ("Добавь окружность головы 41 см", "ru", {"headcircumference_create"}),
    ("Какой у него ИМТ?", "ru", {"bmi_list", "bmi_retrieve"}),
    ("Добавь заметку: сегодня перевернулась", "ru", {"note_create"}),
    ("Найди заметки про врача", "ru", {"note_list"}),
    ("Создай таймер", "ru", {"timer_create"}),
    ("Перезапусти таймер", "ru", {"timer_restart"}),
    ("Какие таймеры запущены?", "ru", {"timer_list"}),
    ("Запиши 10 минут на животе", "ru", {"tummytime_create"}),
    ("Сколько времени на животе за неделю?", "ru", {"tummytime_list"}),
    ("Я сцедила 90 мл в семь утра", "ru", {"pumping_create"}),
    ("Покажи все сцеживания", "ru", {"pumping_list"}),
    ("Добавь второго ребёнка, Лео", "ru", {"child_create"}),
    ("Покажи список детей", "ru", {"child_list"}),
    ("Создай метку «зубы»", "ru", {"tag_create"}),
    ("Удали метку «болеет»", "ru", {"tag_destroy"}),
    ("Сохрани этот код как фрагмент", "ru", {"snippet_create"}),
    ("Покажи мои фрагменты кода", "ru", {"snippet_list"}),
    ("Удали фрагмент кода test", "ru", {"snippet_destroy"}),
    ("Какие пользователи есть на сайте?", "ru", {"user_list"}),
    ("Исправь вес за понедельник на 5,9 кг", "ru", {"weight_partial_update", "weight_update"}),
]
