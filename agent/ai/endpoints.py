"""Which endpoint a user's turn uses, and why.

A personal endpoint is set by staff (any endpoint) or picked by the user (only from
``AgentSettings.selectable_endpoints``). It is used while it is enabled and, for a user's
pick, still on the allow-list; otherwise the site default answers, and the turn records
the fallback with its reason so the user can be told once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.conf import agent_settings
from ..models import UNREAD, AgentSettings, Endpoint, UserSettings

PERSONAL, DEFAULT, FALLBACK = "personal", "default", "fallback"
DISABLED, NOT_ALLOWED, GONE = "disabled", "not_allowed", "gone"


@dataclass(frozen=True)
class Choice:
    """The endpoint in effect (None: none configured), where it comes from, and a fallback's reason."""

    endpoint: Endpoint | None
    source: str
    reason: str = ""


def key_env_allowed(name: str) -> bool:
    """Whether an endpoint may name the environment variable ``name`` for its key: only names with
    ``AGENT["API_KEY_ENV_PREFIX"]``, so no endpoint can send another of the process's variables."""
    prefix = agent_settings.API_KEY_ENV_PREFIX
    return bool(prefix) and isinstance(prefix, str) and name.startswith(prefix) and len(name) > len(prefix)


def effective(
    user: Any, *, pictures: bool = False, user_settings: Any = UNREAD, site: AgentSettings | None = None
) -> Choice:
    """The endpoint a turn of ``user`` uses now; with ``pictures``, the one for a turn with pictures.

    ``user_settings`` and ``site`` save a query each when the caller already read the user's row
    (None: there is none) or the site's.
    """
    own = _own_settings(user) if user_settings is UNREAD else user_settings
    site = site or AgentSettings.current()
    if pictures:
        return _pictures(own, site)
    return _choose(own, "endpoint", site, site.default_endpoint)


def speech(user: Any, *, user_settings: Any = UNREAD) -> Choice:
    """The endpoint that turns ``user``'s voice into text: their own (chosen as a chat endpoint is),
    else the site's speech endpoint; its ``endpoint`` is None when neither can transcribe now."""
    own = _own_settings(user) if user_settings is UNREAD else user_settings
    return _speech(own, AgentSettings.current())


def chosen(user: Any, *, user_settings: Any = UNREAD) -> dict[str, Choice]:
    """Every choice at once, for the panel and the admin: ``{"chat": ..., "pictures": ..., "speech": ...}``."""
    own = _own_settings(user) if user_settings is UNREAD else user_settings
    site = AgentSettings.current()
    return {
        "chat": _choose(own, "endpoint", site, site.default_endpoint),
        "pictures": _pictures(own, site),
        "speech": _speech(own, site),
    }


def personal_problem(endpoint: Endpoint | None, set_by: str, allowed: set[int]) -> str:
    """Why a personal endpoint cannot be used ("" when it can): gone, disabled or not allowed."""
    if endpoint is None:
        return GONE if set_by else ""
    if not endpoint.enabled:
        return DISABLED
    if set_by == UserSettings.SetBy.USER and endpoint.pk not in allowed:
        return NOT_ALLOWED
    return ""


def allowed_ids(site: AgentSettings | None = None) -> set[int]:
    """The ids of the endpoints users may pick (the allow-list)."""
    site = site or AgentSettings.current()
    return set(site.selectable_endpoints.values_list("pk", flat=True))


def _own_settings(user: Any) -> UserSettings | None:
    pk = getattr(user, "pk", user)
    related = ("endpoint", "picture_endpoint", "speech_endpoint")
    return UserSettings.objects.filter(user_id=pk).select_related(*related).first()


def _choose(own: UserSettings | None, field: str, site: AgentSettings, default: Endpoint | None) -> Choice:
    """The personal endpoint in ``field`` when usable; else ``default``, as a fallback when one was set."""
    if own is None:
        return Choice(default, DEFAULT)
    endpoint = getattr(own, field)
    set_by = getattr(own, f"{field}_set_by") or (UserSettings.SetBy.STAFF if endpoint is not None else "")
    if endpoint is None and not set_by:
        return Choice(default, DEFAULT)
    allowed = allowed_ids(site) if set_by == UserSettings.SetBy.USER else set()
    problem = personal_problem(endpoint, set_by, allowed)
    if problem:
        return Choice(default, FALLBACK, problem)
    return Choice(endpoint, PERSONAL)


def _speech(own: UserSettings | None, site: AgentSettings) -> Choice:
    """The user's speech endpoint while it can transcribe, else the site's (only one that can)."""
    site_speech = site.speech_endpoint
    if site_speech is not None and not (site_speech.enabled and site_speech.supports_transcription):
        site_speech = None
    choice = _choose(own, "speech_endpoint", site, site_speech)
    if choice.source == PERSONAL and choice.endpoint is not None and not choice.endpoint.supports_transcription:
        return Choice(site_speech, FALLBACK, NOT_ALLOWED)
    return choice


def _pictures(own: UserSettings | None, site: AgentSettings) -> Choice:
    """The user's picture endpoint, else the site's (when enabled), else the chat endpoint."""
    site_pictures = site.picture_endpoint
    if site_pictures is not None and not site_pictures.enabled:
        site_pictures = None
    chat = _choose(own, "endpoint", site, site.default_endpoint)
    default = site_pictures or chat.endpoint
    choice = _choose(own, "picture_endpoint", site, default)
    if choice.source == DEFAULT and site_pictures is None:
        return chat  # no picture endpoint anywhere: pictures go where the chat goes, for the same reason
    return choice
