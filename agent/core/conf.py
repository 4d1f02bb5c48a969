"""Every setting of the app with its default and the rule its value must keep, in one place.

Values are read from ``settings.AGENT`` on every access (never at import
time), so ``override_settings(AGENT={...})`` works in tests. Each setting
names its ``Rule``; the system checks (``agent.checks.settings``) loop over them, so
a new setting is one line here, checked from the start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, TypeVar

from django.conf import settings
from django.utils.functional import Promise
from django.utils.module_loading import import_string
from django.utils.translation import gettext_lazy as _

from .file_kinds import BY_TYPE, KINDS

T = TypeVar("T")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _number_at_least_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _int_at_least_zero(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _strings(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value)


def _phrases(value: Any) -> bool:
    """Sentences for the page: plain strings, or lazy translations (``gettext_lazy``)."""
    return isinstance(value, (list, tuple)) and all(isinstance(item, (str, Promise)) for item in value)


def _importable(value: Any) -> list[str]:
    """The paths of ``value`` (a path or a list of them) that do not import."""
    broken = []
    for path in [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else [value]:
        try:
            import_string(path)
        except (ImportError, AttributeError, TypeError, ValueError):  # AttributeError: not a string at all
            broken.append(path)
    return broken


@dataclass(frozen=True)
class Rule:
    """What a setting's value must be, and the system check error that says it is not."""

    check_id: str
    must: str
    holds: Callable[[Any], bool]
    hint: str | None = None

    def problems(self, name: str, value: Any) -> list[str]:
        if self.holds(value):
            return []
        return [f"AGENT[{name!r}] must be {self.must}, not {value!r}."]


class _Importable(Rule):
    def problems(self, name: str, value: Any) -> list[str]:
        return [f"AGENT[{name!r}] names {path!r}, which cannot be imported." for path in _importable(value)]


POSITIVE = Rule("agent.E003", "a positive integer", _positive_int)
AT_LEAST_ZERO = Rule("agent.E004", "a number ≥ 0", _number_at_least_zero)
IMPORTABLE = _Importable("agent.E006", "importable", lambda value: not _importable(value))
MODULE_NAMES = Rule("agent.E007", "a list of module names", _strings)
NONE_OR_POSITIVE = Rule("agent.E008", "None or a positive integer", lambda v: v is None or _positive_int(v))
KEY_PREFIX = Rule(
    "agent.E010",
    "a non-empty string",
    lambda value: isinstance(value, str) and bool(value.strip()),
    hint="Without a prefix an endpoint could name any variable of the process, SECRET_KEY too.",
)
NONE_OR_AT_LEAST_ZERO = Rule("agent.E012", "None or an integer ≥ 0", lambda v: v is None or _int_at_least_zero(v))
BOOLEAN = Rule("agent.E018", "True or False", lambda value: isinstance(value, bool))
NAME = Rule("agent.E018", "a non-empty string", lambda value: isinstance(value, str) and bool(value.strip()))
PHRASES = Rule("agent.E018", "a list of strings (or lazy translations)", _phrases)
NONE_OR_NAME = Rule("agent.E018", "None or a non-empty string", lambda v: v is None or NAME.holds(v))
KNOWN_TYPES = Rule(
    "agent.E018",
    f"a list of these content types: {', '.join(BY_TYPE)}",
    lambda value: _strings(value) and all(item in BY_TYPE for item in value),
)

TELEGRAM_KEYS = frozenset({"TOKEN", "TOKEN_ENV", "MODE", "SECRET", "BOT_USERNAME", "BASE_URL"})
WEBHOOK_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
"""What Telegram accepts as a webhook's secret token."""


class _OptionalFunction(Rule):
    def problems(self, name: str, value: Any) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, str) or _importable(value):
            return [f"AGENT[{name!r}] names {value!r}, which cannot be imported."]
        return [] if callable(import_string(value)) else [f"AGENT[{name!r}] names {value!r}, which is not callable."]


NONE_OR_FUNCTION = _OptionalFunction("agent.E006", "None or the dotted path of a function", lambda value: True)


class _SectionRule(Rule):
    """A setting that is None (the part is off) or a dict of known ``keys``; ``more`` judges its values."""

    keys: ClassVar[frozenset[str]] = frozenset()

    def problems(self, name: str, value: Any) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, dict):
            return [f"AGENT[{name!r}] must be None or a dict, not {type(value).__name__}."]
        unknown = sorted(set(value) - self.keys)
        found = [f"AGENT[{name!r}] has unknown keys: {', '.join(unknown)}."] if unknown else []
        return found + self.more(name, value)

    def more(self, name: str, value: dict[str, Any]) -> list[str]:
        return []


class _TelegramRule(_SectionRule):
    keys = TELEGRAM_KEYS

    def more(self, name: str, value: dict[str, Any]) -> list[str]:
        found = []
        if not (NAME.holds(value.get("TOKEN")) or NAME.holds(value.get("TOKEN_ENV"))):
            found.append(f"AGENT[{name!r}] needs TOKEN, or TOKEN_ENV naming the variable that holds it.")
        if not NAME.holds(value.get("BOT_USERNAME")):
            found.append(f"AGENT[{name!r}] needs BOT_USERNAME (the bot's @name, for the link users open).")
        mode = value.get("MODE", "webhook")
        if mode not in ("webhook", "polling"):
            found.append(f"AGENT[{name!r}]['MODE'] must be 'webhook' or 'polling', not {mode!r}.")
        if mode == "webhook" and not WEBHOOK_SECRET.match(str(value.get("SECRET") or "")):
            found.append(f"AGENT[{name!r}] in webhook mode needs SECRET: 1-256 of A-Z, a-z, 0-9, _ and -.")
        return found


class _McpRule(_SectionRule):
    keys = frozenset({"OAUTH"})

    def more(self, name: str, value: dict[str, Any]) -> list[str]:
        if not isinstance(value.get("OAUTH", False), bool):
            return [f"AGENT[{name!r}]['OAUTH'] must be True or False."]
        return []


# {} turns the MCP server on with personal tokens; {"OAUTH": True} signs clients in with OAuth too
MCP_SETTINGS = _McpRule("agent.E021", "None or the MCP server's settings", lambda value: True, hint="See docs/mcp.md.")


TELEGRAM_SETTINGS = _TelegramRule(
    "agent.E019",
    "None or the bot's settings",
    lambda value: True,
    hint="See 'Telegram' in docs/operations.md.",
)


class _Setting(Generic[T]):
    """One key of ``settings.AGENT`` with its default and its rule."""

    def __init__(self, default: T, rule: Rule) -> None:
        self.default = default
        self.rule = rule

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, objtype: type | None = None) -> T:
        # the site's value, as set: the system checks hold it to the rule
        value: T = getattr(settings, "AGENT", {}).get(self.name, self.default)
        return value

    def problems(self) -> list[str]:
        """What is wrong with the value the site set (or the default), in the words of a system check."""
        return self.rule.problems(self.name, self.__get__(None, AgentConf))


class _SameAs(_Setting[T]):
    """A setting that, unset, takes the value of another one."""

    def __init__(self, other: str, rule: Rule) -> None:
        super().__init__(None, rule)  # type: ignore[arg-type]
        self.other = other

    def __get__(self, obj: object, objtype: type | None = None) -> T:
        value = super().__get__(obj, objtype)
        return getattr(objtype or type(obj), self.other) if value is None else value

    def problems(self) -> list[str]:
        unset = getattr(settings, "AGENT", {}).get(self.name) is None
        return [] if unset else super().problems()  # unset, the other setting's own check speaks


class AgentConf:
    HISTORY_CHARS = _Setting[int](32_000, POSITIVE)
    TOOL_RESULT_CHARS = _Setting[int](8_000, POSITIVE)  # also the longest a tool call's arguments may be
    MAX_TOOL_ARGUMENT_DEPTH = _Setting[int](32, POSITIVE)  # a tool call's arguments nest at most this deep
    TOOL_ENUM_MAX = _Setting[int](40, POSITIVE)  # a parameter with more values is described, not listed
    TOOL_DESCRIPTION_CHARS = _Setting[int](400, POSITIVE)  # of a tool's description, as the model reads it
    TOOL_PARAMETER_DESCRIPTION_CHARS = _Setting[int](200, POSITIVE)  # of each parameter's
    CARD_VALUE_CHARS = _Setting[int](2_000, POSITIVE)  # of a value a card shows and the user does not edit
    MAX_TOOL_ROUNDS = _Setting[int](8, POSITIVE)
    MAX_TOOL_CALLS_PER_ROUND = _Setting[int](10, POSITIVE)
    TOOLS_INLINE_MAX = _Setting[int](20, POSITIVE)  # past this many visible tools, a call carries the best-ranked
    TOOLS_INLINE_BYTES = _Setting[int](16_000, POSITIVE)  # the most bytes of tool definitions a model call carries
    TOOLS_RANK_CHARS = _Setting[int](2_000, POSITIVE)  # of the chat, newest first, that ranks the tools offered
    TOOL_RANKER = _Setting["str | None"](None, NONE_OR_FUNCTION)  # a site's own rank(scope, text, *, limit)
    TURN_DEADLINE_S = _Setting[int](180, POSITIVE)
    STOP_GRACE_S = _Setting[int](10, POSITIVE)
    LOCK_LEASE_S = _Setting[int](30, POSITIVE)
    LOCK_RENEW_S = _Setting[int](10, POSITIVE)
    QUEUED_REQUEUE_S = _Setting[int](30, POSITIVE)
    CONFIRMATION_TTL_S = _Setting[int](900, POSITIVE)
    MAX_TURNS_PER_USER = _Setting[int](3, POSITIVE)
    MAX_FILES_PER_MESSAGE = _Setting[int](5, POSITIVE)
    MAX_FILE_BYTES = _Setting[int](20 * 1024 * 1024, POSITIVE)
    MAX_STORED_BYTES_PER_USER = _Setting[int](500 * 1024 * 1024, AT_LEAST_ZERO)  # a user's files together; 0: no cap
    NEW_CHATS_PER_MINUTE = _Setting[int](20, AT_LEAST_ZERO)  # per user; 0: no cap
    UPLOADS_PER_MINUTE = _Setting[int](30, AT_LEAST_ZERO)  # per user, removed files too; 0: no cap
    TRANSCRIPTIONS_PER_MINUTE = _Setting[int](10, AT_LEAST_ZERO)  # recordings per user; 0: no cap
    MAX_REQUEST_BYTES = _Setting["int | None"](None, NONE_OR_AT_LEAST_ZERO)  # None: from MAX_FILE_BYTES; 0: off
    OFF_PURPOSE_LIMIT = _Setting[int](3, POSITIVE)
    DAILY_COST_PER_USER = _Setting[float](0, AT_LEAST_ZERO)
    DAILY_TURNS_PER_USER = _Setting[int](0, AT_LEAST_ZERO)
    DAILY_COST_SITE = _Setting[float](0, AT_LEAST_ZERO)
    CHATS_PAGE = _Setting[int](20, POSITIVE)
    CHATS_PAGE_MAX = _Setting[int](50, POSITIVE)
    MESSAGES_PAGE = _Setting[int](50, POSITIVE)
    MESSAGES_PAGE_MAX = _Setting[int](200, POSITIVE)
    AUTO_TITLE_CHARS = _Setting[int](60, POSITIVE)
    MAX_TITLE_CHARS = _Setting[int](200, POSITIVE)
    MAX_INSTRUCTIONS_CHARS = _Setting[int](4_000, POSITIVE)
    WS_MAX_FRAME_BYTES = _Setting[int](64 * 1024, POSITIVE)
    WS_FRAMES_PER_10S = _Setting[int](40, POSITIVE)
    SOCKET_RECHECK_S = _Setting[int](30, POSITIVE)  # an open socket checks its session again at least this often
    MAX_STREAMS_PER_USER = _Setting[int](20, POSITIVE)  # open sockets and event streams of one user together
    STREAM_LEASE_S = _Setting[int](60, POSITIVE)  # a stream's slot outlives its crashed process this long at most
    SOCKET_BACKLOG = _Setting[int](100, POSITIVE)  # events waiting for one socket; past that it resyncs
    EVENTS_KEEPALIVE_S = _Setting[int](15, POSITIVE)  # an event stream over HTTP sends a comment line this often
    STREAM_INTERVAL_MS = _Setting[int](100, POSITIVE)  # at most one draft of a streamed answer per chat this often
    RETENTION_DAYS = _Setting["int | None"](None, NONE_OR_POSITIVE)
    PURGE_DELETED_DAYS = _Setting[int](30, POSITIVE)
    CAPTURE_CONTENT = _Setting[bool](False, BOOLEAN)
    SESSION_WRITE_MODULES = _Setting["list[str]"]([], MODULE_NAMES)
    IMPERSONATION_DETECTOR = _Setting[str]("agent.access.hijack_detector", IMPORTABLE)
    SCOPE_CHECKS = _Setting["list[str]"]([], IMPORTABLE)
    USAGE_SINKS = _Setting["list[str]"]([], IMPORTABLE)
    MODEL_MAX_RETRIES = _Setting[int](2, AT_LEAST_ZERO)
    # the adapter class of every endpoint that names none of its own; agent.E017 refuses one that does not import
    PROVIDER_ADAPTER = _Setting[str]("agent.ai.providers.OpenAICompatible", NAME)
    API_KEY_ENV_PREFIX = _Setting[str]("AGENT_KEY_", KEY_PREFIX)  # an endpoint's key variable must start with it
    TASK_QUEUE = _Setting[str]("agent", NAME)  # the Celery queue of every task of the app; its workers run -Q <this>
    ATTACHMENT_STORAGE = _Setting[str]("default", NAME)  # an alias of settings.STORAGES
    ACCEPTED_TYPES = _Setting["list[str]"]([kind.content_type for kind in KINDS], KNOWN_TYPES)
    ATTACHMENT_TEXT_CHARS = _SameAs[int]("HISTORY_CHARS", POSITIVE)
    EXTRACTION_TIMEOUT_S = _Setting[int](30, POSITIVE)
    EXTRACTION_MEMORY_MB = _Setting[int](1024, POSITIVE)
    EXTRACTION_MAX_PAGES = _Setting[int](500, POSITIVE)
    EXTRACTION_MAX_ROWS = _Setting[int](100_000, POSITIVE)
    EXTRACTION_MAX_COLUMNS = _Setting[int](200, POSITIVE)
    EXTRACTION_MAX_PIXELS = _Setting[int](50_000_000, POSITIVE)
    EXTRACTION_MAX_UNZIPPED_BYTES = _Setting[int](200 * 1024 * 1024, POSITIVE)
    PICTURE_MAX_PX = _Setting[int](1568, POSITIVE)
    UNLINKED_FILES_MAX_AGE_S = _Setting[int](24 * 3600, POSITIVE)
    LOGOUT_URL = _Setting["str | None"](None, NONE_OR_NAME)  # a URL name or path that signs out on POST
    # buttons on an empty chat that fill the message box; [] shows none
    STARTER_SUGGESTIONS = _Setting["list[str | Promise]"](
        [_("What can you help me with?"), _("What can you look up for me?"), _("What can you change for me?")], PHRASES
    )
    MAX_VOICE_S = _Setting[int](120, POSITIVE)  # the longest recording transcribed
    MAX_VOICE_BYTES = _Setting[int](25 * 1024 * 1024, POSITIVE)  # the largest recording taken
    TELEGRAM = _Setting["dict[str, Any] | None"](None, TELEGRAM_SETTINGS)  # None: the assistant is not in Telegram
    TELEGRAM_LINK_TTL_S = _Setting[int](600, POSITIVE)  # a link token's life
    TELEGRAM_LINK_TRIES_PER_MINUTE = _Setting[int](5, POSITIVE)  # link tokens one Telegram chat may try
    TELEGRAM_EDIT_INTERVAL_MS = _Setting[int](1000, POSITIVE)  # at most one edit of a streamed answer this often
    MCP = _Setting["dict[str, Any] | None"](None, MCP_SETTINGS)  # None: no MCP server; {} serves it with tokens
    MCP_TOKEN_TTL_DAYS = _Setting[int](90, POSITIVE)  # a personal access token's life unless its maker says
    MCP_CALLS_PER_MINUTE = _Setting[int](60, POSITIVE)  # tools/list and tools/call per token per minute
    MCP_MAX_REQUEST_BYTES = _Setting[int](1024 * 1024, POSITIVE)  # one JSON-RPC request's body; larger is 413
    MCP_REGISTRATIONS_PER_MINUTE = _Setting[int](10, POSITIVE)  # OAuth clients one IP address may register

    @classmethod
    def names(cls) -> list[str]:
        return [n for n, v in vars(cls).items() if isinstance(v, _Setting)]

    @classmethod
    def problems(cls) -> list[tuple[Rule, str]]:
        """Each setting's problems with its rule (whose ``check_id`` names the check)."""
        return [(v.rule, message) for v in vars(cls).values() if isinstance(v, _Setting) for message in v.problems()]

    def defaults(self) -> dict[str, Any]:
        return {n: vars(type(self))[n].default for n in self.names()}


agent_settings = AgentConf()
