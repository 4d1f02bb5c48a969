"""The "My assistant" page and its JSON API, over `agent.user_settings`, `agent.telegram` and `agent.mcp`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import get_language
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import telegram, user_settings
from ..access import TELEGRAM_PERMISSION, Scope, SessionRef, authorize_session, is_impersonated, language_for
from ..core import errors
from ..core.conf import agent_settings
from ..mcp import tokens
from ..telegram import bot
from .http import api, read_body, strict_policy, unavailable


@require_http_methods(["GET", "POST"])
@api
def settings_api(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    """GET: the panel's data. POST (JSON): the user's changes, then the panel's data."""
    if request.method == "POST":
        data = user_settings.update(actor, read_body(request), impersonated=impersonated)
    else:
        data = user_settings.panel(actor, impersonated=impersonated)
    scope = authorize_session(actor, impersonated=impersonated)
    return {**data, "telegram": _telegram(scope), "mcp": _mcp(request, scope)}


@require_POST
@api
def telegram_link(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    """A one-time link that connects the Telegram chat which opens it to this user."""
    token = telegram.link_token(actor, impersonated=impersonated)
    return {"url": telegram.link_url(token), "expires_in": agent_settings.TELEGRAM_LINK_TTL_S}


@require_POST
@api
def telegram_revoke(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    """Disconnect one of the user's Telegram chats (``{"link": id}``); the panel's Telegram part after."""
    telegram.revoke(actor, read_body(request).get("link"), impersonated=impersonated)
    return {"telegram": _telegram(authorize_session(actor, impersonated=impersonated))}


@require_POST
@api
def mcp_token(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    """A new token for an MCP client (``{"name": ...}``): its secret, shown this once, and the panel's MCP part."""
    secret = tokens.create(actor, read_body(request).get("name"), impersonated=impersonated)
    return {"secret": secret, "mcp": _mcp(request, authorize_session(actor, impersonated=impersonated))}


@require_POST
@api
def mcp_revoke(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    """End one of the user's tokens (``{"token": id}``); the panel's MCP part after."""
    tokens.revoke(actor, read_body(request).get("token"), impersonated=impersonated)
    return {"mcp": _mcp(request, authorize_session(actor, impersonated=impersonated))}


@require_POST
@api
def mcp_disconnect(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    """Disconnect one of the apps the user connected with OAuth (``{"app": id}``): every token of theirs
    for it revoked; the panel's MCP part after. Routed only where OAuth is on."""
    from ..mcp import oauth  # django-oauth-toolkit: imported only where OAuth is on

    oauth.disconnect(actor, read_body(request).get("app"), impersonated=impersonated)
    return {"mcp": _mcp(request, authorize_session(actor, impersonated=impersonated))}


def _mcp(request: HttpRequest, scope: Scope) -> dict[str, Any]:
    """Whether the user may connect MCP clients, the address they connect to, their tokens (never a
    secret) and, where OAuth is on, the apps they connected with it (never a token)."""
    offered = tokens.offered(scope)
    data: dict[str, Any] = {
        "offered": offered,
        "url": request.build_absolute_uri(reverse("agent:mcp")) if offered else "",
        "tokens": tokens.listed(scope.actor, impersonated=False) if offered else [],
    }
    if tokens.oauth_on():
        from ..mcp import oauth  # django-oauth-toolkit: imported only where OAuth is on

        data["apps"] = oauth.connected_apps(scope.actor, impersonated=False) if offered else []
    return data


def _telegram(scope: Scope) -> dict[str, Any]:
    """Whether the user may connect Telegram, the bot's name, and their live links (never a chat id)."""
    settings = bot.config()
    offered = settings is not None and scope.has_perm(TELEGRAM_PERMISSION)
    links = telegram.live_links(scope.actor, impersonated=False) if offered else []
    return {
        "offered": offered,
        "bot": settings.username if settings is not None else "",
        "links": [{"id": link.pk, "name": link.name, "created_at": link.created_at.isoformat()} for link in links],
    }


@strict_policy
@login_required
@require_GET
def page(request: HttpRequest) -> HttpResponse:
    """The panel at its own URL; its data comes over the API, never inline."""
    try:
        scope = authorize_session(SessionRef.from_request(request), impersonated=is_impersonated(request))
    except errors.Refusal as refusal:
        return unavailable(request, refusal)
    config = {
        "api_url": reverse("agent:assistant_api"),
        "telegram_link_url": reverse("agent:telegram_link"),
        "telegram_revoke_url": reverse("agent:telegram_revoke"),
        "mcp_token_url": reverse("agent:mcp_tokens"),
        "mcp_revoke_url": reverse("agent:mcp_revoke"),
        "mcp_disconnect_url": reverse("agent:mcp_disconnect") if tokens.oauth_on() else "",
        "max_instructions": agent_settings.MAX_INSTRUCTIONS_CHARS,
    }
    context = {"config": config, "chat_url": reverse("agent:chat"), "oauth": tokens.oauth_on()}
    with translation.override(language_for(scope.user_settings, get_language())):
        return render(request, "agent/assistant.html", context)
