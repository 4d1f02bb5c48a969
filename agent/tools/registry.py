"""How a site declares a tool (``@agent_tool`` in its apps' ``tools.py``), and the contract every
caller of a tool keeps: what a tool is given (``ToolContext``), who may apply a write, and the
digest a card compares at the click. The executor and the cards both build on this module.
"""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterator, Literal, Mapping

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.utils.functional import Promise
from django.utils.module_loading import autodiscover_modules
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..access import read_with_scope
from ..core.conf import agent_settings
from .definitions import readable
from .requests import live_request

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
FIND_TOOLS = "find_tools"
"""The assistant's own tool that searches a user's tools when they are too many to send; no site's
tool takes its name."""
EMPTY_OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True)
class Tool:
    name: str
    kind: Literal["read", "write"]
    description: str
    func: Callable[..., Any]
    parameters: dict[str, Any] = field(default_factory=lambda: dict(EMPTY_OBJECT))
    permission: str | None = None
    module: str | None = None
    preview: Callable[..., Any] | None = None
    fingerprint: Callable[..., str] | None = None
    title: Any = None
    """What a person calls the tool (``gettext_lazy``), shown on its card and in its steps."""
    labels: Mapping[str, Any] = field(default_factory=dict)
    """The preview's keys as a person reads them (``gettext_lazy``); with labels, only these show."""
    validate: Callable[..., None] | None = None
    """``validate(ctx, **args)`` raises ``ValidationError`` (by field) for what the schema cannot
    judge: run on the model's arguments and on every edit the user makes on the card."""
    parameters_for: Callable[[Any], dict[str, Any]] | None = None
    """``parameters_for(scope)``: the parameters as this user's request shapes them (a viewset's
    serializer may depend on the request); ``parameters`` stands for them where no user is known."""
    available: Callable[[Any], bool] | None = None
    """``available(scope)``: whether the site's own rules (a viewset's permission classes) let
    this user use the tool at all, besides ``permission``; asked once per turn."""
    tell_result: bool = False
    """Whether the model reads what a confirmed write returned (JSON, cut to ``TOOL_RESULT_CHARS``)
    in the turn after it: a viewset's answer, a form's saved object."""

    def display_title(self) -> str:
        """The title in the active language, else the tool's name."""
        return str(self.title) if self.title else self.name

    def schema(self, scope: Any = None) -> dict[str, Any]:
        """The parameters for ``scope``'s user (the scope-free ones without a scope)."""
        build = self.parameters_for
        if scope is None or build is None:
            return self.parameters
        schema: dict[str, Any] = once((self.name, "parameters", scope.user_id), lambda: build(scope))
        return schema

    @cached_property
    def validator(self) -> Draft202012Validator:
        """Of the scope-free ``parameters``: built once per tool, as the schema does not change."""
        return Draft202012Validator(self.parameters)

    def validator_for(self, scope: Any) -> Draft202012Validator:
        """The validator of ``schema(scope)``, built once per schema (a checked schema does not change)."""
        if self.parameters_for is None:
            return self.validator
        schema = self.schema(scope)
        held = self._validators.get(id(schema))
        if held is None or held[0] is not schema:
            held = self._validators[id(schema)] = (schema, Draft202012Validator(schema))
        return held[1]

    @cached_property
    def _validators(self) -> dict[int, tuple[dict[str, Any], Draft202012Validator]]:
        return {}

    def definition(self, scope: Any = None) -> dict[str, Any]:
        """The tool as the OpenAI chat API takes it, for ``scope``'s user, as a model reads it best
        (``agent.tools.definitions``)."""
        description, parameters = readable(self.description, self.schema(scope))
        return {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": parameters},
        }

    def offered_to(self, scope: Any) -> bool:
        """Whether the site's own rules (``available``) let this user use the tool, asked once per turn."""
        ask = self.available
        if ask is None:
            return True
        return bool(once((self.name, "available", scope.user_id), lambda: ask(scope)))


_THIS_TURN: ContextVar[dict[Any, Any] | None] = ContextVar("agent_tool_checks", default=None)


@contextmanager
def checked_once() -> Iterator[None]:
    """What tools ask the site about a user (may they use it, what are its parameters) is asked
    once inside this block (a turn), not again in each round and at each call."""
    token = _THIS_TURN.set({})
    try:
        yield
    finally:
        _THIS_TURN.reset(token)


def once(key: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered under ``key`` inside ``checked_once``; outside it, asked every time."""
    memo = _THIS_TURN.get()
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


@dataclass(frozen=True)
class ToolContext:
    """What a tool gets besides its arguments."""

    user: Any
    scope: Any
    conversation: Any
    turn_ref: Any
    language: str

    @cached_property
    def request(self) -> Any:
        """A GET request of the live session (its user, session and language), for the site's code
        that takes a request: a DRF view, a form, a helper of its own."""
        return live_request(self.scope)

    def request_for(
        self,
        method: str,
        path: str = "/",
        *,
        query: Mapping[str, Any] | None = None,
        data: Any = None,
        csrf_checked: bool = False,
    ) -> Any:
        """A request of the live session with the method, path, query and ``data`` (a JSON body) the
        site's code wants, e.g. a POST for one of its views.

        ``csrf_checked=True`` lets the site's views skip their CSRF check, which a request built
        here cannot pass: only for a write tool's function (it runs at the user's Confirm, itself
        a CSRF-checked request) or a request that changes nothing."""
        return live_request(self.scope, method=method, path=path, query=query, data=data, csrf_checked=csrf_checked)


OBJECT_NAME = gettext_lazy("%(thing)s %(key)s")


def object_name(instance: Any) -> str:
    """What a card and the model call a model's object: its ``str()``, unless that is only
    Django's "Feeding object (1)", then its verbose name and key ("Feeding 1")."""
    text = str(instance)
    if text != f"{type(instance).__name__} object ({instance.pk})":
        return text
    return str(OBJECT_NAME) % {"thing": capfirst(str(instance._meta.verbose_name)), "key": instance.pk}


def card_value(value: Any) -> Any:
    """A value a card shows for reading alone (what a delete removes, what an update replaces), cut
    to ``CARD_VALUE_CHARS``: a card stays small whatever the object holds."""
    limit = agent_settings.CARD_VALUE_CHARS
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False, default=str)
        return value if len(text) <= limit else text[:limit] + "…"
    return value


class Refused(Exception):
    """Raised by a tool to refuse a call as the site refuses it: ``denied`` (not this user's to
    do) or ``invalid_arguments`` (the model can correct them); ``result`` is what the model is told."""

    def __init__(self, outcome: Literal["denied", "invalid_arguments"], result: dict[str, Any]) -> None:
        super().__init__(outcome)
        self.outcome: Literal["denied", "invalid_arguments"] = outcome
        self.result = result


def invalid_arguments(invalid: ValidationError) -> dict[str, Any]:
    """A ``ValidationError`` as the model is told it: each field's messages, in the user's language."""
    fields = invalid.message_dict if hasattr(invalid, "error_dict") else {"__all__": invalid.messages}
    details = [f"{name}: {text}" if name != "__all__" else text for name, texts in fields.items() for text in texts]
    return {"error": "invalid_arguments", "details": details}


Outcome = Literal["ok", "error", "denied", "invalid_arguments", "needs_confirmation"]


@dataclass(frozen=True)
class ToolResult:
    """What a tool call came to: its outcome, what the model is told, and the card of a write."""

    outcome: Outcome
    result: Any
    confirmation: Any = None


def may_write(scope: Any, tool: Tool) -> bool:
    """Whether this session may apply ``tool``'s change now: its module lets sessions write and
    the user holds its permission."""
    return (
        tool.kind == "write"
        and tool.module in agent_settings.SESSION_WRITE_MODULES
        and (not tool.permission or scope.has_perm(tool.permission))
    )


def compute_fingerprint(tool: Tool, ctx: ToolContext, args: dict[str, Any], preview: Any = None) -> str:
    """A digest of the data the write would change: the tool's own, else of its preview."""
    if tool.fingerprint is not None:
        return str(tool.fingerprint(ctx, **args))
    if preview is None:
        preview = tool.preview(ctx, **args)  # type: ignore[misc]
    canonical = json.dumps(preview, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class Registry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._by_name: tuple[Tool, ...] | None = None  # sorted once per change: a turn's every round reads it
        self.left_out: dict[str, str] = {}
        """What a site registered that could not become a tool, and why: ``manage.py check`` names each."""

    def leave_out(self, what: str, why: str) -> None:
        self.left_out[what] = why

    def register(self, tool: Tool) -> Tool:
        if tool.name == FIND_TOOLS:
            raise ImproperlyConfigured(f"{FIND_TOOLS!r} is the assistant's own tool; name the agent tool otherwise.")
        if tool.name in self._tools and self._tools[tool.name].func is not tool.func:
            raise ImproperlyConfigured(f"Two agent tools are named {tool.name!r}.")
        self._tools[tool.name] = tool
        self._by_name = None
        if tool.permission:
            read_with_scope(tool.permission)
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)
        self._by_name = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        if self._by_name is None:
            self._by_name = tuple(sorted(self._tools.values(), key=lambda t: t.name))
        return list(self._by_name)

    def autodiscover(self) -> None:
        autodiscover_modules("tools")


registry = Registry()


def agent_tool(
    *,
    name: str,
    description: str,
    kind: Literal["read", "write"] = "read",
    parameters: dict[str, Any] | None = None,
    permission: str | None = None,
    module: str | None = None,
    preview: Callable[..., Any] | None = None,
    fingerprint: Callable[..., str] | None = None,
    title: Any = None,
    labels: Mapping[str, Any] | None = None,
    validate: Callable[..., None] | None = None,
    tell_result: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a function as a tool; a bad declaration fails at start-up.

    A read runs on the model's call with the session's rights. A write
    (``kind="write"``, with ``module`` and ``preview``) only ever becomes a card.
    ``title`` and ``labels`` (lazy translations) are what the page shows a person
    for the tool and its preview's keys. A preview of ``{"fields": [...]}`` (see
    ``agent.confirmations.editable_fields``) lets the user change the fields marked
    ``editable`` on the card; ``validate`` checks what the schema cannot.
    With ``tell_result``, what a confirmed write returns is what the model reads
    of it in the next turn (an id it can go on from).
    """

    def declare(func: Callable[..., Any]) -> Callable[..., Any]:
        schema = dict(EMPTY_OBJECT) if parameters is None else parameters
        _validate_declaration(name, kind, description, schema, module, preview)  # before the Tool reads them
        _validate_words(name, title, labels)
        tool = Tool(
            name,
            kind,
            description.strip(),
            func,
            schema,
            permission,
            module,
            preview,
            fingerprint,
            title,
            dict(labels or {}),
            validate,
            tell_result=tell_result,
        )
        registry.register(tool)
        func.agent_tool = tool  # type: ignore[attr-defined]
        return func

    return declare


def declared(tool: Tool) -> Tool:
    """Check a built tool's declaration and register it, as ``agent_tool`` does for a hand-written
    one: how the tools made from a site's viewsets and forms enter. A bad one fails at start-up."""
    _validate_declaration(tool.name, tool.kind, tool.description, tool.parameters, tool.module, tool.preview)
    _validate_words(tool.name, tool.title, tool.labels)
    return registry.register(tool)


def _validate_declaration(name: Any, kind: Any, description: Any, schema: Any, module: Any, preview: Any) -> None:
    where = f"agent tool {name!r}"
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ImproperlyConfigured(f"{where}: the name must match {NAME_PATTERN.pattern}.")
    if kind not in ("read", "write"):
        raise ImproperlyConfigured(f"{where}: kind must be 'read' or 'write'.")
    if not isinstance(description, str) or not description.strip():
        raise ImproperlyConfigured(f"{where}: a description is required; the model reads it.")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ImproperlyConfigured(f"{where}: parameters must be a JSON Schema of type 'object'.")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise ImproperlyConfigured(f"{where}: invalid parameters schema: {error.message}") from None
    if kind == "write" and (not module or not callable(preview)):
        raise ImproperlyConfigured(f"{where}: a write tool needs a module and a preview callable.")


def _validate_words(name: Any, title: Any, labels: Any) -> None:
    """A title and labels are phrases: lazy translations (not evaluated here), or non-blank strings."""
    where = f"agent tool {name!r}"
    if title is not None and not _is_phrase(title):
        raise ImproperlyConfigured(f"{where}: title must be a non-blank string or a lazy translation.")
    if labels is None:
        return
    if not isinstance(labels, Mapping):
        raise ImproperlyConfigured(f"{where}: labels must map preview keys to phrases.")
    for key, label in labels.items():
        if not isinstance(key, str) or not _is_phrase(label):
            raise ImproperlyConfigured(f"{where}: label {key!r} must be a non-blank string or a lazy translation.")


def _is_phrase(value: Any) -> bool:
    return isinstance(value, Promise) or isinstance(value, str) and bool(value.strip())
