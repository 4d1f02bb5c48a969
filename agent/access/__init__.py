"""Who may act: a live credential (an actor), checked afresh on every call.

An actor is a browser session (``SessionRef``), a linked Telegram chat
(``TelegramRef``) or an MCP client's personal access token (``McpRef``).
``authorize_session`` turns any of them into a ``Scope`` (what it may do now)
or raises a ``Refusal``. What "live" means for each kind is
said here and nowhere else:

- a session: its row exists and has not expired, it is the user's, its
  password hash is still the user's (a password change ends it), it is not an
  operator's (impersonation); a logout deletes it.
- a Telegram link: its row is not revoked (the user revokes it on "My
  assistant" or with /stop in Telegram, staff in the admin), and the user holds
  ``agent.use_telegram`` too.
- an MCP token: its row is not revoked and not expired, and the user holds
  ``agent.use_mcp`` too. Impersonation never applies: a token is the user's own.
  An OAuth access token (django-oauth-toolkit's, where the site signs MCP
  clients in with OAuth) is the same but for its row: it exists (revoking
  deletes it), has not expired, carries the scope ``agent`` and names a user
  and the client it was issued to.

For every kind, the user must be active, hold ``agent.use_agent`` and have the
assistant on. Nothing here caches across calls, so a revocation, a
deactivation or a lost permission takes effect on the very next call: a
running turn checks its actor before every step.

The parts, from the bottom: ``actors`` (the credentials and the ``Scope``),
``statement`` (the one SQL statement a check reads) and ``rules`` (what Python
judges of the row it reads), and ``check`` (the two together, run before every
call and step). The rest of the app imports the names below from here.
"""

from .actors import (
    MCP_PERMISSION,
    OAUTH_SCOPE,
    TELEGRAM_PERMISSION,
    Actor,
    McpRef,
    Scope,
    SessionRef,
    TelegramRef,
    actor_fields,
    actor_of,
    language_for,
)
from .check import Check, authorize_session, authorize_with, prepare_check
from .rules import Accepted, hijack_detector, is_impersonated
from .statement import has_scope, read_with_scope, sessions_in_sql

__all__ = [
    "MCP_PERMISSION",
    "OAUTH_SCOPE",
    "TELEGRAM_PERMISSION",
    "Accepted",
    "Actor",
    "Check",
    "McpRef",
    "Scope",
    "SessionRef",
    "TelegramRef",
    "actor_fields",
    "actor_of",
    "authorize_session",
    "authorize_with",
    "has_scope",
    "hijack_detector",
    "is_impersonated",
    "language_for",
    "prepare_check",
    "read_with_scope",
    "sessions_in_sql",
]
