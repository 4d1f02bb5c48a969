"""Who may act: a live browser session, checked afresh on every call (SPEC §1).

A ``SessionRef`` names a session; ``authorize_session`` turns it into a
``Scope`` (what that session may do now) or raises a ``Refusal``. Nothing
here caches across calls, so a logout, a password change, a deactivation or
a lost permission takes effect on the very next call.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Callable

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from . import errors
from .conf import agent_settings

USE_PERMISSION = "agent.use_agent"


@dataclass(frozen=True)
class SessionRef:
    """A live Django session and the user it was read for. The key is a credential."""

    session_key: str = field(repr=False)
    user_id: int

    def __repr__(self) -> str:
        return f"SessionRef(user_id={self.user_id!r})"

    @classmethod
    def from_request(cls, request: Any) -> "SessionRef":
        return cls(session_key=request.session.session_key or "", user_id=request.user.pk)

    @classmethod
    def from_scope(cls, scope: dict[str, Any]) -> "SessionRef":
        session = scope.get("session")
        user = scope.get("user")
        return cls(
            session_key=(session.session_key if session is not None else None) or "",
            user_id=getattr(user, "pk", None),
        )

    @property
    def group(self) -> str:
        """The Channels group of this session's sockets (a hash, never the key)."""
        return session_group(self.session_key)


@dataclass(frozen=True)
class Scope:
    """What a live session may do now. Built per call, never cached."""

    ref: SessionRef
    user: Any
    language: str
    user_settings: Any = None

    @property
    def user_id(self) -> int:
        return self.user.pk

    def has_perm(self, permission: str) -> bool:
        return bool(self.user.has_perm(permission))


def session_group(session_key: str) -> str:
    digest = hashlib.sha256(f"agent-session:{session_key}".encode()).hexdigest()[:40]
    return f"agent.session.{digest}"


def user_group(user_id: int) -> str:
    return f"agent.user.{user_id}"


SITE_GROUP = "agent.site"


def hijack_detector(request_or_scope: Any) -> bool:
    """Default detector: django-hijack keeps ``hijack_history`` in the session."""
    session = _session_of(request_or_scope)
    return bool(session is not None and session.get("hijack_history"))


def is_impersonated(request_or_scope: Any) -> bool:
    """Whether this request or Channels scope belongs to an impersonating operator."""
    detector: Callable[[Any], bool] = import_string(agent_settings.IMPERSONATION_DETECTOR)
    return bool(detector(request_or_scope))


def _session_of(request_or_scope: Any) -> Any:
    if isinstance(request_or_scope, dict):
        return request_or_scope.get("session")
    return getattr(request_or_scope, "session", None)


def load_session(session_key: str) -> dict[str, Any]:
    """The session's data through the site's session engine; ``{}`` when gone."""
    if not session_key:
        return {}
    engine = import_module(settings.SESSION_ENGINE)
    store = engine.SessionStore(session_key=session_key)
    return dict(store.load())


def authorize_session(ref: SessionRef, *, impersonated: bool) -> Scope:
    """Checks 1-3 of SPEC §1: the session may use the assistant now."""
    if impersonated:
        raise errors.Impersonated()
    user = _live_user(ref)
    from .models import AgentSettings

    user_settings = getattr(user, "agent_settings", None)
    if not AgentSettings.current().enabled or not user.has_perm(USE_PERMISSION):
        raise errors.Forbidden()
    if user_settings is not None and user_settings.enabled is False:
        raise errors.Forbidden()
    return Scope(ref=ref, user=user, language=language_for(user_settings), user_settings=user_settings)


def _live_user(ref: SessionRef) -> Any:
    """Check 2: the session exists, is this user's, and still matches them."""
    if not isinstance(ref, SessionRef) or ref.user_id is None:
        raise errors.SessionGone()
    data = load_session(ref.session_key)
    session_user = data.get(SESSION_KEY)
    if session_user is None:
        raise errors.SessionGone()
    if str(session_user) != str(ref.user_id):
        raise errors.Mismatch()
    user = get_user_model()._default_manager.select_related("agent_settings").filter(pk=ref.user_id).first()
    if user is None:
        raise errors.SessionGone()
    if not _hash_matches(user, data.get(HASH_SESSION_KEY, "")):
        raise errors.SessionGone()
    if not user.is_active:
        raise errors.Inactive()
    for path in agent_settings.SCOPE_CHECKS:
        code = import_string(path)(user, data)
        if code:
            raise errors.ScopeRefused(code)
    return user


def _hash_matches(user: Any, session_hash: str) -> bool:
    if not hasattr(user, "get_session_auth_hash"):
        return True
    if constant_time_compare(session_hash, user.get_session_auth_hash()):
        return True
    return any(constant_time_compare(session_hash, h) for h in user.get_session_auth_fallback_hash())


def language_for(user_settings: Any, fallback: str | None = None) -> str:
    """The user's language: their own setting, else the request's, else the site's."""
    if user_settings is not None and user_settings.language:
        return user_settings.language
    return fallback or settings.LANGUAGE_CODE
