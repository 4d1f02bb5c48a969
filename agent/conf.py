"""Every setting of the app with its default, in one place.

Values are read from ``settings.AGENT`` on every access (never at import
time), so ``override_settings(AGENT={...})`` works in tests.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from django.conf import settings

T = TypeVar("T")


class _Setting(Generic[T]):
    """One key of ``settings.AGENT`` with its default."""

    def __init__(self, default: T) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, objtype: type | None = None) -> T:
        return getattr(settings, "AGENT", {}).get(self.name, self.default)


class _SameAs(_Setting[T]):
    """A setting that, unset, takes the value of another one."""

    def __init__(self, other: str) -> None:
        super().__init__(None)  # type: ignore[arg-type]
        self.other = other

    def __get__(self, obj: object, objtype: type | None = None) -> T:
        value = super().__get__(obj, objtype)
        return getattr(objtype or type(obj), self.other) if value is None else value


PICTURE_TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"]
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


class AgentConf:
    HISTORY_CHARS = _Setting[int](32_000)
    TOOL_RESULT_CHARS = _Setting[int](8_000)
    MAX_TOOL_ROUNDS = _Setting[int](8)
    MAX_TOOL_CALLS_PER_ROUND = _Setting[int](10)
    TURN_DEADLINE_S = _Setting[int](180)
    STOP_GRACE_S = _Setting[int](10)
    LOCK_LEASE_S = _Setting[int](30)
    LOCK_RENEW_S = _Setting[int](10)
    QUEUED_REQUEUE_S = _Setting[int](30)
    CONFIRMATION_TTL_S = _Setting[int](900)
    MAX_TURNS_PER_USER = _Setting[int](3)
    MAX_FILES_PER_MESSAGE = _Setting[int](5)
    MAX_FILE_BYTES = _Setting[int](20 * 1024 * 1024)
    MAX_STORED_BYTES_PER_USER = _Setting[int](500 * 1024 * 1024)  # all of a user's files together; 0: no cap
    NEW_CHATS_PER_MINUTE = _Setting[int](20)  # per user; 0: no cap
    UPLOADS_PER_MINUTE = _Setting[int](30)  # per user; 0: no cap
    MAX_REQUEST_BYTES = _Setting["int | None"](None)  # agent.body_limit; None: from MAX_FILE_BYTES; 0: off
    OFF_PURPOSE_LIMIT = _Setting[int](3)
    DAILY_COST_PER_USER = _Setting[float](0)
    DAILY_TURNS_PER_USER = _Setting[int](0)
    DAILY_COST_SITE = _Setting[float](0)
    CHATS_PAGE = _Setting[int](20)
    CHATS_PAGE_MAX = _Setting[int](50)
    MESSAGES_PAGE = _Setting[int](50)
    MESSAGES_PAGE_MAX = _Setting[int](200)
    AUTO_TITLE_CHARS = _Setting[int](60)
    MAX_TITLE_CHARS = _Setting[int](200)
    MAX_INSTRUCTIONS_CHARS = _Setting[int](4_000)
    WS_MAX_FRAME_BYTES = _Setting[int](64 * 1024)
    WS_FRAMES_PER_10S = _Setting[int](40)
    SOCKET_RECHECK_S = _Setting[int](30)  # an open socket checks its session again at least this often
    SOCKET_BACKLOG = _Setting[int](100)  # events waiting for one socket; past that it resyncs
    EVENTS_KEEPALIVE_S = _Setting[int](15)  # an event stream over HTTP sends a comment line this often
    STREAM_INTERVAL_MS = _Setting[int](100)  # at most one draft of a streamed answer per chat this often
    RETENTION_DAYS = _Setting["int | None"](None)
    PURGE_DELETED_DAYS = _Setting[int](30)
    CAPTURE_CONTENT = _Setting[bool](False)
    SESSION_WRITE_MODULES = _Setting["list[str]"]([])
    IMPERSONATION_DETECTOR = _Setting[str]("agent.access.hijack_detector")
    SCOPE_CHECKS = _Setting["list[str]"]([])
    USAGE_SINKS = _Setting["list[str]"]([])
    MODEL_MAX_RETRIES = _Setting[int](2)
    API_KEY_ENV_PREFIX = _Setting[str]("AGENT_KEY_")  # an endpoint's key variable must start with it
    TASK_QUEUE = _Setting[str]("agent")  # the Celery queue of every task of the app; its workers run -Q <this>
    ATTACHMENT_STORAGE = _Setting[str]("default")  # an alias of settings.STORAGES
    ACCEPTED_TYPES = _Setting["list[str]"](
        ["text/plain", "text/markdown", "text/csv", "application/json", "application/pdf", *PICTURE_TYPES, XLSX_TYPE]
    )
    ATTACHMENT_TEXT_CHARS = _SameAs[int]("HISTORY_CHARS")
    EXTRACTION_TIMEOUT_S = _Setting[int](30)
    EXTRACTION_MEMORY_MB = _Setting[int](1024)
    EXTRACTION_MAX_PAGES = _Setting[int](500)
    EXTRACTION_MAX_ROWS = _Setting[int](100_000)
    EXTRACTION_MAX_COLUMNS = _Setting[int](200)
    EXTRACTION_MAX_PIXELS = _Setting[int](50_000_000)
    EXTRACTION_MAX_UNZIPPED_BYTES = _Setting[int](200 * 1024 * 1024)
    PICTURE_MAX_PX = _Setting[int](1568)
    UNLINKED_FILES_MAX_AGE_S = _Setting[int](24 * 3600)
    LOGOUT_URL = _Setting["str | None"](None)  # a URL name or path that signs out on POST; None: no Sign out

    @classmethod
    def names(cls) -> list[str]:
        return [n for n, v in vars(cls).items() if isinstance(v, _Setting)]

    def defaults(self) -> dict[str, Any]:
        return {n: vars(type(self))[n].default for n in self.names()}


agent_settings = AgentConf()
