"""The actors: the live credentials a call is made for, and the ``Scope`` a check grants one.

An actor is a value that names a credential (a session key, a Telegram link, a token's digest) and
the user it was read for; nothing here reads the database. Apart from the check, so every part that
only passes an actor along (a turn's row, a websocket, a tool request) needs none of its SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from ..core.events import session_group

USE_PERMISSION = "agent.use_agent"
TELEGRAM_PERMISSION = "agent.use_telegram"
MCP_PERMISSION = "agent.use_mcp"
OAUTH_SCOPE = "agent"
"""The OAuth scope an access token must carry to call the assistant's tools."""


@dataclass(frozen=True)
class SessionRef:
    """A live Django session and the user it was read for. The key is a credential."""

    session_key: str = field(repr=False)
    user_id: int | None  # None: nobody signed in, refused by every check

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
class TelegramRef:
    """A linked Telegram chat (``TelegramLink``) and the user it was linked to: a credential too."""

    link_id: int
    user_id: int | None

    def __repr__(self) -> str:
        return f"TelegramRef(link_id={self.link_id!r}, user_id={self.user_id!r})"


@dataclass(frozen=True)
class McpRef:
    """An MCP client's bearer token by its secret's SHA-256 digest: a credential. A personal access
    token (``McpToken``), or with ``oauth`` an OAuth access token (django-oauth-toolkit's, whose
    ``token_checksum`` is the same digest).

    Made from the bearer secret alone (``user_id`` None); the scope a check builds carries the one
    with the token's user, id and name (an OAuth token's: its client's) filled in from the same statement.
    """

    digest: str = field(repr=False)
    user_id: int | None = None
    token_id: int | None = None
    token_name: str = ""
    oauth: bool = False
    application_id: int | None = None  # an OAuth token's client

    def __repr__(self) -> str:
        return f"McpRef(token_id={self.token_id!r}, user_id={self.user_id!r}, oauth={self.oauth!r})"

    @property
    def grant(self) -> str:
        """What a client's calls belong to: its personal token, or its OAuth client for this user
        (whose access tokens change at every refresh)."""
        return f"oauth:{self.application_id}" if self.oauth else f"token:{self.token_id}"


Actor = SessionRef | TelegramRef | McpRef
"""The live credential a call is made for."""


def actor_fields(actor: Actor) -> dict[str, Any]:
    """The columns of a ``Turn`` that name its actor, so its runner checks the same one at every step."""
    if isinstance(actor, TelegramRef):
        return {"session_key": "", "telegram_link_id": actor.link_id}
    if isinstance(actor, McpRef):
        raise TypeError("an MCP token runs no turns: its calls are answered within their request")
    return {"session_key": actor.session_key, "telegram_link_id": None}


def actor_of(turn: Any) -> Actor:
    """The actor a turn runs for, from its row (an ended turn's is gone: every check refuses it)."""
    if turn.telegram_link_id is not None:
        return TelegramRef(link_id=turn.telegram_link_id, user_id=turn.user_id)
    return SessionRef(session_key=turn.session_key, user_id=turn.user_id)


@dataclass(frozen=True)
class Scope:
    """What a live actor may do now. Built per call, never cached."""

    actor: Actor
    user: Any
    language: str
    user_settings: Any = None
    checked: frozenset[str] = frozenset()
    permissions: frozenset[str] | None = None  # of ``checked``, those held, read with the scope

    @property
    def user_id(self) -> Any:
        """The user's primary key, of whatever type the site's user model gives it."""
        return self.user.pk

    def has_perm(self, permission: str) -> bool:
        if self.permissions is not None and permission in self.checked:
            return permission in self.permissions
        return bool(self.user.has_perm(permission))


def language_for(user_settings: Any, fallback: str | None = None) -> str:
    """The user's language: their own setting, else the request's, else the site's."""
    if user_settings is not None and user_settings.language:
        return str(user_settings.language)
    return fallback or settings.LANGUAGE_CODE
