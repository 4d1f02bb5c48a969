"""The rules a checked row is judged by in Python: the session is live and the user's, not an
operator's, and still matches the user's password; the user is active and passes the site's own checks.

Apart from the statement that reads the row, as these are the steps no SQL can take: a session's data
is decoded by the site's session engine, impersonation is told by a detector the site may swap, and a
site may add checks of its own (``SCOPE_CHECKS``). ``Accepted`` keeps a verdict that depends on a
session's data and password alone, so a turn's next check need not decode them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.base_user import AbstractBaseUser
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from ..core import errors
from ..core.conf import agent_settings
from .actors import SessionRef

_DEFAULT_DETECTOR = "agent.access.hijack_detector"


def hijack_detector(request_or_scope: Any) -> bool:
    """Default detector: django-hijack keeps ``hijack_history`` in the session."""
    session = _session_of(request_or_scope)
    return bool(session is not None and session.get("hijack_history"))


def is_impersonated(request_or_scope: Any) -> bool:
    """Whether this request or Channels scope belongs to an impersonating operator."""
    detector: Callable[[Any], bool] = import_string(agent_settings.IMPERSONATION_DETECTOR)
    return bool(detector(request_or_scope))


def _session_impersonated(data: dict[str, Any]) -> bool:
    """Whether the session, as stored now, is an operator's: a session marked after a socket
    opened or a turn began is refused from its next check on.

    The detector gets a scope-like dict whose ``session`` is the stored data.
    """
    return is_impersonated({"type": "session", "session": data})


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


def check_session(actor: SessionRef, user: Any, *, data_in_row: bool) -> None:
    """The session row is there, unexpired, this user's, not an operator's, and still matches the user.

    With ``data_in_row`` the row carries the session's stored data; else it is read through the engine."""
    if user is None:
        _session_user(load_session(actor.session_key), actor)  # a gone or foreign session says so first
        raise errors.SessionGone()
    if data_in_row:
        raw = user.agent_session_data
        data = _decode_session(raw) if raw else {}
    else:
        data = load_session(actor.session_key)
    _session_user(data, actor)
    if _session_impersonated(data):
        raise errors.Impersonated()
    if not _hash_matches(user, data.get(HASH_SESSION_KEY, "")):
        raise errors.SessionGone()  # the password changed since the session began
    check_user(user, data)


def _decode_session(raw: str) -> dict[str, Any]:
    engine = import_module(settings.SESSION_ENGINE)
    return dict(engine.SessionStore().decode(raw))


def _session_user(data: dict[str, Any], actor: SessionRef) -> None:
    """The session exists and is this user's."""
    session_user = data.get(SESSION_KEY)
    if session_user is None:
        raise errors.SessionGone()
    if str(session_user) != str(actor.user_id):
        raise errors.Mismatch()


def check_user(user: Any, data: dict[str, Any]) -> None:
    """The user is active and passes the site's own checks (``data``: the session's, empty for a link)."""
    if not user.is_active:
        raise errors.Inactive()
    for path in agent_settings.SCOPE_CHECKS:
        code = import_string(path)(user, data)
        if code:
            raise errors.ScopeRefused(code)


def _hash_matches(user: Any, session_hash: str) -> bool:
    if not hasattr(user, "get_session_auth_hash"):
        return True
    if constant_time_compare(session_hash, user.get_session_auth_hash()):
        return True
    return any(constant_time_compare(session_hash, h) for h in user.get_session_auth_fallback_hash())


@dataclass
class Accepted:
    """A session's stored data and its user's password hash as a check of one turn passed them."""

    session_data: str | None = None
    password: str | None = None

    def covers(self, user: Any) -> bool:
        data = getattr(user, "agent_session_data", None)
        return (
            self.session_data is not None
            and data == self.session_data
            and user.password == self.password
            and bool(user.is_active)
        )

    def learn(self, user: Any) -> None:
        """Keep what a check passed on, where the verdict depends on nothing else: Django's own
        session hash (of the password alone), the default impersonation detector (of the stored
        data alone) and no site checks of its own."""
        data = getattr(user, "agent_session_data", None)
        if data is not None and _verdict_from_data_and_password(user):
            self.session_data, self.password = data, user.password


def _verdict_from_data_and_password(user: Any) -> bool:
    own_hash = getattr(type(user), "get_session_auth_hash", None) is AbstractBaseUser.get_session_auth_hash
    default_detector = agent_settings.IMPERSONATION_DETECTOR == _DEFAULT_DETECTOR
    return own_hash and default_detector and not agent_settings.SCOPE_CHECKS
