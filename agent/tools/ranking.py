"""Which tools fit a text: BM25 over word stems, in the user's language and in English.

Local and deterministic: no network, no model. A tool's words are its name, its title and
description (in the user's language and in English, where the site translates them) and its
parameters' names, descriptions and choices. Stems come from small suffix strippers for English
and Russian (a Russian stem is kept to five letters, so "ребёнок" meets "ребёнка") and the first
letters of a word in other languages (four for Estonian), so "feedings" meets "feeding" and
"кормления" meets "кормление". A few action words ("add", "change", "delete", "show", "how many")
and their Russian and Estonian forms stand for the action they ask for, so "добавь" finds a tool
named ``*_create``.

The index of a set of tools is built once and kept (``INDEXES`` of them, the least recently
used dropped), so ranking a thousand tools costs a dictionary walk over the query's stems.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

from django.utils import translation

WORD = re.compile(r"[^\W\d_]+|\d+")
CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
CYRILLIC = re.compile(r"[а-яё]")

K1, B = 1.2, 0.75
"""BM25's usual constants: how fast a word's repeats stop counting, how much a long text is discounted."""

FIELD_WEIGHTS = {"name": 2.0, "title": 2.0, "description": 1.0, "parameter": 0.5}
"""A word in a tool's name or title says more about it than one in a parameter's description."""

INDEXES = 64
"""Indexes kept per process: one per distinct set of visible tools and language."""


# -- stems -------------------------------------------------------------------------------------

_EN_SUFFIXES = ("ational", "ization", "ments", "ment", "ness", "ings", "ing", "edly", "ed", "ly", "ion", "ions")
_RU_ENDINGS = sorted(
    """иями ями ами иях ях ием ием ией ией иям ям ями ого его ому ему ыми ими ешь ишь ете ите ейте уйте ила ыла
    ена ило ыло ено ует уют ены ить ыть ать ять еть уть ах ов ев ей ий ый ой ое ее ие ые ая яя ую юю ою ею ом ем
    ам им ым их ых ия ья ию ью ие ье ии ий ют ят ит ыт ил ыл ен ла на ли ло но ны ть ет ем
    а е и й о у ы ь ю я""".split(),
    key=len,
    reverse=True,
)


def _english(word: str) -> str:
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in _EN_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # "stopped" → "stop"
            break
    if word.endswith("y"):
        word = word[:-1] + "i"  # "tummy", "tummies" → "tummi"
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]  # "change", "changed" → "chang"
    return word


def _russian(word: str) -> str:
    word = word.replace("ё", "е")
    if word.endswith(("ся", "сь")) and len(word) > 4:
        word = word[:-2]
    for ending in _RU_ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[: -len(ending)]
            break
    word = word[:-1] if word.endswith(("ь", "и")) and len(word) > 3 else word
    return word[:5]  # "ребёнок", "ребёнка": a vowel that comes and goes inside the stem


def _prefix(length: int) -> Callable[[str], str]:
    return lambda word: word[:length]


_STEMMERS: dict[str, Callable[[str], str]] = {"en": _english, "ru": _russian, "et": _prefix(4)}
_OTHER = _prefix(5)


@lru_cache(maxsize=100_000)
def stem(word: str, language: str) -> str:
    """The stem of one lower-case word: Cyrillic by the Russian rules, else by the language's own."""
    if CYRILLIC.search(word):
        return _russian(word)
    return _STEMMERS.get(language[:2], _OTHER)(word)


_STOP = set(
    """a an and the of to for in on at by with from is are be it its this that these those i me my we our you your
    please can could would will do does one there have has he she him her his they them
    я мне мой моя мои моё мы нам наш ты вы ваш и в во на по с со к о об из за для от до это этот эта эти
    пожалуйста ли же бы не нет да он она его её ее они их как что
    ma mina mu minu me meie sa sina te teie ja ning on see need palun""".split()
)

_CONCEPTS = {
    "~create": """create add new record log register enter insert make save start
        добавь добавить добавьте добавлю создай создать создайте новый новая новое новую запиши записать запишите
        внеси внести отметь отметить зарегистрируй сохрани сохранить сохраните
        lisa lisada lisage loo luua uus salvesta kirjuta märgi""",
    "~update": """update change edit modify correct fix set rename adjust replace partial
        измени изменить измените поменяй поменять исправь исправить исправьте обнови обновить отредактируй
        редактировать замени заменить поправь поправить переименуй
        muuda muuta muutke paranda parandada uuenda uuendada""",
    "~delete": """delete remove destroy erase drop
        удали удалить удалите убери убрать сотри стереть
        kustuta kustutada kustutage eemalda eemaldada""",
    "~list": """list all every search find filter many much which what how when recent history were was did
        список все всех найди найти найдите поиск сколько какие какой какая каких когда история
        loetelu nimekiri kõik leia leida otsi otsida mitu palju millal milline mis kui""",
    "~read": """get read retrieve open detail details
        открой открыть прочитай прочитать подробно
        ava loe""",
    "~read ~list": """show view display see look lookup
        покажи показать покажите посмотри посмотреть
        näita näidata näidake vaata vaadata""",
}
"""Action words by what they ask for. A request's word may ask for two ("show": one record, or a
list); a tool's own word says the first only ("Show a feeding" reads one)."""


@lru_cache(maxsize=8)
def _concepts(language: str) -> dict[str, tuple[str, ...]]:
    """Each concept word's stems (by the language's rules and by English's) to its concepts."""
    found: dict[str, tuple[str, ...]] = {}
    for concepts, words in _CONCEPTS.items():
        for word in words.split():
            for root in {stem(word, language), stem(word, "en")}:
                found[root] = tuple(dict.fromkeys((*found.get(root, ()), *concepts.split())))
    return found


def stems(text: str, language: str, *, request: bool = True) -> list[str]:
    """The text's stems, stop words left out, each followed by its concepts where it has any (a
    tool's words, ``request=False``: its first concept only)."""
    concepts = _concepts(language[:2])
    found = []
    for word in WORD.findall(CAMEL.sub(" ", text).lower()):
        if word in _STOP:
            continue
        root = stem(word, language)
        found.append(root)
        found += concepts.get(root, ())[: None if request else 1]
    return found


# -- documents and the index ---------------------------------------------------------------------


def _fields(tool: Any) -> list[tuple[str, str]]:
    """The tool's words by field, in the active language: its parameters' names, descriptions and
    choices too."""
    fields = [("name", tool.name.replace("_", " ").replace("-", " ")), ("description", str(tool.description))]
    if tool.title:
        fields.append(("title", str(tool.title)))
    for name, schema in (tool.parameters.get("properties") or {}).items():
        fields.append(("parameter", name.replace("_", " ")))
        if isinstance(schema, dict):
            words = [
                schema.get("description"),
                *(schema.get("enum") or ()),
                *(schema.get("items", {}).get("enum") or ()),
            ]
            fields += [("parameter", word) for word in words if isinstance(word, str)]
    return fields


_DOCUMENTS: dict[tuple[int, str], tuple[Any, dict[str, float], float]] = {}
"""Each tool's document per language, with the tool itself (so its identity is never another's):
a new set of tools (another user's rights) is indexed from them without reading a tool again."""


def _document_of(tool: Any, language: str) -> tuple[dict[str, float], float]:
    kept = _DOCUMENTS.get((id(tool), language))
    if kept is None or kept[0] is not tool:
        kept = _DOCUMENTS[id(tool), language] = (tool, *_document(tool, language))
    return kept[1], kept[2]


def _document(tool: Any, language: str) -> tuple[dict[str, float], float]:
    """The tool's weighted stem counts (its English words, and where they differ, its words in
    ``language``) and its length: of its name, title and description only, so that a tool is not
    taken for a worse match for having many parameters."""
    weights: dict[str, float] = {}
    length = 0.0
    with translation.override("en"):
        english = _fields(tool)
    readings = [(english, "en")]
    if language[:2] != "en":
        with translation.override(language):
            own = _fields(tool)
        readings.append(([f for f in own if f not in english], language))
    for fields, stems_language in readings:
        for field, text in fields:
            for root in stems(text, stems_language, request=False):
                weights[root] = weights.get(root, 0.0) + FIELD_WEIGHTS[field]
                length += FIELD_WEIGHTS[field] if field != "parameter" else 0.0
    return weights, length


@dataclass(frozen=True)
class Index:
    """BM25 weights of a set of tools (in name order, so a tie goes to the first name), per stem:
    the positions of the tools that have it and each one's share of the score."""

    tools: Sequence[Any]
    postings: dict[str, tuple[list[int], list[float]]]

    @classmethod
    def build(cls, tools: Iterable[Any], language: str) -> Index:
        tools = sorted(tools, key=lambda tool: tool.name)
        read = [_document_of(tool, language) for tool in tools]
        documents, lengths = [d for d, _length in read], [length for _d, length in read]
        average = (sum(lengths) / len(lengths)) if lengths else 1.0
        frequency: dict[str, int] = {}
        for document in documents:
            for root in document:
                frequency[root] = frequency.get(root, 0) + 1
        count = len(documents)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for position, (document, length) in enumerate(zip(documents, lengths, strict=True)):
            norm = K1 * (1 - B + B * length / (average or 1.0))
            for root, weight in document.items():
                idf = math.log(1 + (count - frequency[root] + 0.5) / (frequency[root] + 0.5))
                positions, shares = postings.setdefault(root, ([], []))
                positions.append(position)
                shares.append(idf * weight * (K1 + 1) / (weight + norm))
        return cls(tuple(tools), postings)

    def rank(self, text: str, language: str, limit: int) -> list[str]:
        """The names of the tools with any word of ``text``, best first, at most ``limit``."""
        scores: dict[int, float] = {}
        for root in set(stems(text, language)) | set(stems(text, "en")):
            positions, shares = self.postings.get(root, ((), ()))
            if not scores:
                scores = dict(zip(positions, shares, strict=True))
                continue
            get = scores.get
            for position, share in zip(positions, shares, strict=True):
                scores[position] = get(position, 0.0) + share
        best = heapq.nsmallest(limit, [(-score, position) for position, score in scores.items()])
        return [self.tools[position].name for _score, position in best]


class _Indexes:
    """The indexes of the latest sets of tools, by the tools themselves (kept alive with their index,
    so an identity never stands for another tool) and the language."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[Any, ...], Index] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tools: Iterable[Any], language: str) -> Index:
        tools = tuple(tools)
        key = (language, *map(id, tools))
        with self._lock:
            index = self._kept.get(key)
            if index is not None:
                self._kept.move_to_end(key)
                return index
        index = Index.build(tools, language)
        with self._lock:
            self._kept[key] = index
            while len(self._kept) > INDEXES:
                self._kept.popitem(last=False)
        return index


indexes = _Indexes()


def lexical_rank(tools: Sequence[Any], text: str, *, language: str, limit: int) -> list[str]:
    """The names of ``tools`` that share a word with ``text``, best first, at most ``limit``."""
    if limit <= 0 or not tools:
        return []
    return indexes.get(tools, language).rank(text, language, limit)
