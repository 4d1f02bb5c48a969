"""Linking a private Telegram chat to a user, and unlinking it.

The page asks for a one-time token (``link_token``) and shows it as a ``t.me`` link; the bot's
``/start <token>`` then links the chat (``link``). A link is a credential, checked by
``agent.access`` like a session on every call and step; revoking it (``revoke``, ``/stop`` in
Telegram, staff in the admin) stops what runs for it at its next step.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from ..access import TELEGRAM_PERMISSION, Actor, Scope, TelegramRef, authorize_session
from ..core import errors
from ..core.conf import agent_settings
from ..limits import quotas
from ..models import TelegramLink, TelegramLinkToken
from .bot import config

TOKEN_BYTES = 24
"""A token of 32 URL-safe characters: within Telegram's 64 for a ``/start`` parameter."""


def link_token(actor: Actor, *, impersonated: bool) -> str:
    """A one-time token that links the Telegram chat which sends it to this user, for ``TELEGRAM_LINK_TTL_S``."""
    scope = _may_link(actor, impersonated=impersonated)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    expires = timezone.now() + timedelta(seconds=agent_settings.TELEGRAM_LINK_TTL_S)
    TelegramLinkToken.objects.create(digest=_digest(token), user_id=scope.user_id, expires_at=expires)
    return token


def link_url(token: str) -> str:
    """The ``t.me`` link that opens the bot with the token."""
    settings = config()
    username = settings.username if settings is not None else ""
    return f"https://t.me/{quote(username)}?start={quote(token)}"


def live_links(actor: Actor, *, impersonated: bool) -> list[TelegramLink]:
    """The user's live links, newest first."""
    scope = authorize_session(actor, impersonated=impersonated)
    return list(TelegramLink.objects.filter(user_id=scope.user_id, revoked_at__isnull=True))


def revoke(actor: Actor, link_id: Any, *, impersonated: bool) -> bool:
    """Unlink one of the user's Telegram chats; False when it was not theirs or not live.

    Only the checks of the session that asks: a user may always cut a link, whatever their rights.
    """
    scope = authorize_session(actor, impersonated=impersonated) if not isinstance(actor, TelegramRef) else None
    user_id = scope.user_id if scope is not None else actor.user_id
    try:
        pk = int(link_id)
    except (TypeError, ValueError):
        return False
    return bool(revoke_where(pk=pk, user_id=user_id))


def revoke_where(**match: Any) -> int:
    """Revoke the live links that match (``/stop`` gives the chat, staff the links): how many."""
    return TelegramLink.objects.filter(revoked_at__isnull=True, **match).update(revoked_at=timezone.now())


@dataclass(frozen=True)
class Linked:
    """What ``/start <token>`` came to: the new link, or why there is none (a sentence to send)."""

    link: TelegramLink | None
    refusal: str = ""


def link(token: str, chat_id: int, *, name: str = "", language: str = "") -> Linked:
    """Link a private chat with a token from the page: single use, before it expires, one live link
    per chat, and only for a user who may use the assistant in Telegram now. A chat tries at most
    ``TELEGRAM_LINK_TRIES_PER_MINUTE`` tokens a minute, so guessing them is slow too."""
    if not quotas.take_link_try(chat_id):
        return Linked(None, _("Too many tries from this chat. Wait a minute, then open a new link from the site."))
    already = _("This Telegram chat is already connected. Send /stop here to disconnect it first.")
    with transaction.atomic():
        if TelegramLink.objects.filter(chat_id=chat_id, revoked_at__isnull=True).exists():
            return Linked(None, already)
        now = timezone.now()
        taken = TelegramLinkToken.objects.filter(digest=_digest(token), used_at__isnull=True, expires_at__gt=now)
        user_id = taken.values_list("user_id", flat=True).first()
        if user_id is None or not taken.update(used_at=now):
            return Linked(None, _("This link does not work: it was used, or it expired. Make a new one on the site."))
        try:
            with transaction.atomic():
                made = TelegramLink.objects.create(user_id=user_id, chat_id=chat_id, name=name[:200], language=language)
        except IntegrityError:  # another /start linked this chat at the same moment
            return Linked(None, already)
        try:  # the new link, as the user's rights stand now: nothing is linked (nor the token used) otherwise
            authorize_session(TelegramRef(made.pk, user_id), impersonated=False)
        except errors.Refusal as refusal:
            transaction.set_rollback(True)
            return Linked(None, refusal.message)
    return Linked(made)


def live_link(chat_id: int) -> TelegramLink | None:
    """The chat's live link, if it has one."""
    return TelegramLink.objects.filter(chat_id=chat_id, revoked_at__isnull=True).select_related("conversation").first()


def _may_link(actor: Actor, *, impersonated: bool) -> Scope:
    scope = authorize_session(actor, impersonated=impersonated)
    if config() is None or not scope.has_perm(TELEGRAM_PERMISSION):
        raise errors.TelegramNotOffered()
    return scope


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
