"""Personal access tokens: what an MCP client sends as ``Authorization: Bearer <secret>``; and
which actor a bearer secret names, a personal token or (where the site signs clients in with
OAuth) an OAuth access token.

A token is an actor (``agent.access.McpRef``), checked like a session on every call. Only the
secret's SHA-256 digest is stored: the secret is shown once, when the token is made, and neither the
user nor staff can read it again. Revoking a token, or its expiry, refuses its next call.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from ..access import MCP_PERMISSION, Actor, McpRef, Scope, authorize_session
from ..core import errors
from ..core.conf import agent_settings
from ..models import McpToken

PREFIX = "agm_"
"""Every secret starts with it, so a secret scanner (or a person) can tell what leaked."""
NAME_CHARS = 100


def issue_token(user: Any, name: str, *, days: int | None = None) -> str:
    """A new token of ``user`` named ``name``, live for ``days`` (default ``MCP_TOKEN_TTL_DAYS``):
    its secret, returned this once. A name the user already has on a live token is a ValidationError."""
    name = _clean_name(name)
    days = agent_settings.MCP_TOKEN_TTL_DAYS if days is None else days
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        raise ValidationError({"days": [_("Choose a whole number of days, at least one.")]})
    secret = PREFIX + secrets.token_urlsafe(32)
    expires = timezone.now() + timedelta(days=days)
    try:
        with transaction.atomic():
            McpToken.objects.create(user=user, name=name, digest=digest(secret), expires_at=expires)
    except IntegrityError:
        raise ValidationError({"name": [_("You already have a token with this name.")]}) from None
    return secret


def revoke_token(user: Any, name: str) -> bool:
    """End the user's live token of this name; False when there is none."""
    return bool(revoke_where(user=user, name=name))


def revoke_where(**match: Any) -> int:
    """Revoke the live tokens that match (the user's one, staff's selection): how many."""
    return McpToken.objects.filter(revoked_at__isnull=True, **match).update(revoked_at=timezone.now())


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def ref_for(secret: str) -> McpRef:
    """The actor a bearer secret names: a personal token by its prefix; any other secret, where
    OAuth is on, an OAuth access token (whose stored checksum is the same digest)."""
    return McpRef(digest=digest(secret), oauth=oauth_on() and not secret.startswith(PREFIX))


def oauth_on() -> bool:
    """Whether the site signs MCP clients in with OAuth too (``AGENT["MCP"]["OAUTH"]``).

    A setting of the wrong shape is no: the URLs still load, and the system check names it."""
    mcp = agent_settings.MCP
    return isinstance(mcp, dict) and mcp.get("OAUTH") is True


def origin(request: Any) -> str:
    """The site as the client called it: the card links' base, and the OAuth issuer's identifier."""
    return f"{request.scheme}://{request.get_host()}"


# -- "My assistant" ------------------------------------------------------------------------------


def create(actor: Actor, name: Any, *, impersonated: bool) -> str:
    """A token for the signed-in user, made on "My assistant": its secret, shown once."""
    scope = may_use(actor, impersonated=impersonated)
    return issue_token(scope.user, name if isinstance(name, str) else "")


def listed(actor: Actor, *, impersonated: bool) -> list[dict[str, Any]]:
    """The user's tokens that are not revoked, newest first: never a secret nor its digest."""
    scope = authorize_session(actor, impersonated=impersonated)
    now = timezone.now()
    return [
        {
            "id": token.pk,
            "name": token.name,
            "created_at": token.created_at.isoformat(),
            "expires_at": token.expires_at.isoformat(),
            "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
            "expired": token.expires_at <= now,
        }
        for token in McpToken.objects.filter(user_id=scope.user_id, revoked_at__isnull=True)
    ]


def revoke(actor: Actor, token_id: Any, *, impersonated: bool) -> bool:
    """Revoke one of the user's tokens; False when it is not theirs or not live. Only the checks of
    the session that asks: a user may always end a token, whatever their rights."""
    scope = authorize_session(actor, impersonated=impersonated)
    try:
        pk = int(token_id)
    except (TypeError, ValueError):
        return False
    return bool(revoke_where(pk=pk, user_id=scope.user_id))


def offered(scope: Scope) -> bool:
    """Whether the site serves MCP and the user may use it."""
    return agent_settings.MCP is not None and scope.has_perm(MCP_PERMISSION)


def may_use(actor: Actor, *, impersonated: bool) -> Scope:
    scope = authorize_session(actor, impersonated=impersonated)
    if not offered(scope):
        raise errors.McpNotOffered()
    return scope


def _clean_name(name: str) -> str:
    name = " ".join(str(name).split())
    if not name:
        raise ValidationError({"name": [_("Give the token a name, such as the app you connect.")]})
    if len(name) > NAME_CHARS:
        raise ValidationError({"name": [_("Keep the name within %(count)d characters.") % {"count": NAME_CHARS}]})
    return name
