"""Signing MCP clients in with OAuth 2.1, on django-oauth-toolkit (the ``django-agent[oauth]`` extra).

Imported only where ``AGENT["MCP"]["OAUTH"]`` is on: by ``agent.mcp.urls``, and by "My assistant" for
the apps a user connected (listed, and disconnected: every token of theirs revoked). The site is its own
authorization server: its metadata (RFC 8414) at the site's root; a registration endpoint (RFC 7591)
that makes public clients only (the authorization code with PKCE, redirect URIs over https or to the
user's own machine); the consent page (the toolkit's authorize view with the app's template, which
asks for PKCE with S256 and refuses an impersonating operator and a user who may not use MCP); and
the toolkit's token and revocation endpoints. Its access tokens carry the scope ``agent``, and
``agent.access`` checks them as it checks personal tokens, on every call.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

from django.db import router, transaction
from django.db.models import Max, Min, Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.views import AuthorizationView

from ..access import OAUTH_SCOPE, Actor, SessionRef, authorize_session, has_scope, is_impersonated
from ..core import errors
from ..limits import quotas
from ..models import McpCall
from . import tokens

NAME_CHARS = 100
"""The longest client name a registration may give (the consent page and the journal show it)."""
URI_CHARS = 2000
MAX_REDIRECT_URIS = 10
LOOPBACK = {"localhost", "127.0.0.1", "::1"}
"""Hosts a redirect URI may reach over plain http: the user's own machine (a desktop app's listener)."""
GRANT_TYPES = ["authorization_code", "refresh_token"]
TEMPLATE = "agent/mcp/authorize.html"


@require_GET
def server_metadata(request: HttpRequest) -> JsonResponse:
    """The authorization server's metadata (RFC 8414): its issuer is the site's origin, which the
    protected resource's metadata names, so a client finds it at ``/.well-known/oauth-authorization-server``."""

    def url(name: str) -> str:
        return request.build_absolute_uri(reverse(name))

    return JsonResponse(
        {
            "issuer": tokens.origin(request),
            "authorization_endpoint": url("agent:mcp_authorize"),
            "token_endpoint": url("agent:mcp_token"),
            "registration_endpoint": url("agent:mcp_register"),
            "revocation_endpoint": url("agent:mcp_revoke_token"),
            "scopes_supported": [OAUTH_SCOPE],
            "response_types_supported": ["code"],
            "grant_types_supported": GRANT_TYPES,
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
        }
    )


@csrf_exempt  # a client registers with no session: nothing a cross-site form could borrow
@require_POST
def register(request: HttpRequest) -> JsonResponse:
    """Dynamic client registration (RFC 7591) of a public client: what a client asks beyond the
    authorization code, PKCE and the scope ``agent`` it is not given. Capped per IP address."""
    if not quotas.take_registration(request.META.get("REMOTE_ADDR") or ""):
        response = _refused("too_many_requests", _("Too many registrations from this address. Try again later."), 429)
        response["Retry-After"] = str(int(quotas.WINDOW.total_seconds()))
        return response
    try:
        asked = json.loads(request.body)
    except ValueError:
        asked = None
    if not isinstance(asked, dict):
        return _refused("invalid_client_metadata", _("Send the client's metadata as a JSON object."))
    uris = asked.get("redirect_uris")
    if not isinstance(uris, list) or not 0 < len(uris) <= MAX_REDIRECT_URIS or not all(map(_redirect_allowed, uris)):
        message = _("Give 1 to %(count)d redirect URIs, each over https or over http to this machine (loopback).")
        return _refused("invalid_redirect_uri", message % {"count": MAX_REDIRECT_URIS})
    name = asked.get("client_name", "")
    name = " ".join(name.split()) if isinstance(name, str) else None
    if name is None or len(name) > NAME_CHARS:
        message = _("Give a client name of at most %(count)d characters.") % {"count": NAME_CHARS}
        return _refused("invalid_client_metadata", message)
    grants = asked.get("grant_types", ["authorization_code"])
    responses = asked.get("response_types", ["code"])
    if not _subset(grants, GRANT_TYPES) or "authorization_code" not in grants or not _subset(responses, ["code"]):
        return _refused("invalid_client_metadata", _("Only the authorization code grant (with PKCE) is offered."))
    Application = get_application_model()
    client = Application.objects.create(
        name=name or "MCP client",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(uris),
        skip_authorization=False,
    )
    registered = {
        "client_id": client.client_id,
        "client_id_issued_at": int(time.time()),
        "client_name": client.name,
        "redirect_uris": uris,
        "grant_types": GRANT_TYPES,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": OAUTH_SCOPE,
    }
    return JsonResponse(registered, status=201)


class Consent(AuthorizationView):
    """The toolkit's authorize view with the app's page. It refuses, before the toolkit reads the
    request, one without PKCE's S256 challenge, an operator impersonating the user, and a user who
    may not use the assistant's tools from MCP clients (no grant would let them call)."""

    template_name = TEMPLATE

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = _refusal(request, request.GET)
        response = refused or super().get(request, *args, **kwargs)
        return _with_policy(response, request.GET.get("redirect_uri", ""))

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = _refusal(request, request.POST)
        response = refused or super().post(request, *args, **kwargs)
        return _with_policy(response, request.POST.get("redirect_uri", ""))


def _refusal(request: HttpRequest, params: Any) -> HttpResponse | None:
    if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
        message = _("This app did not ask in the safe way (PKCE with S256), so it cannot be connected.")
        return render(request, TEMPLATE, {"refusal": message}, status=400)
    try:
        tokens.may_use(SessionRef.from_request(request), impersonated=is_impersonated(request))
    except errors.Refusal as refusal:
        return render(request, TEMPLATE, {"refusal": refusal.message}, status=403)
    return None


def _with_policy(response: HttpResponse, redirect_uri: str) -> HttpResponse:
    """The assistant's strict policy, but for a form that may go on to the client's redirect URI
    (a browser holds a form's redirect to ``form-action`` too)."""
    target = urlsplit(redirect_uri) if _redirect_allowed(redirect_uri) else None
    sources = "'self'" + (f" {target.scheme}://{target.netloc}" if target is not None else "")
    response["Content-Security-Policy"] = (
        "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
        f"base-uri 'none'; object-src 'none'; form-action {sources}"
    )
    return response


def _redirect_allowed(uri: Any) -> bool:
    """An absolute https URI, or http to the loopback; no fragment, no credentials, no spaces."""
    if not isinstance(uri, str) or not uri or len(uri) > URI_CHARS or any(c.isspace() or ord(c) < 32 for c in uri):
        return False
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  # a port that is not a number is refused here
    except ValueError:
        return False
    if not parts.hostname or parts.fragment or "#" in uri or parts.username is not None:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK)


def _subset(values: Any, allowed: list[str]) -> bool:
    return isinstance(values, list) and all(isinstance(value, str) and value in allowed for value in values)


def _refused(code: str, description: str, status: int = 400) -> JsonResponse:
    """An error as RFC 7591 answers it."""
    return JsonResponse({"error": code, "error_description": description}, status=status)


# -- "My assistant": the apps a user connected -----------------------------------------------------


def connected_apps(actor: Actor, *, impersonated: bool) -> list[dict[str, Any]]:
    """The clients holding a live access or refresh token of the signed-in user, newest first: each
    one's name, when the user connected it and when it last called. Never a token nor a client id."""
    scope = authorize_session(actor, impersonated=impersonated)
    access, refresh = _live_tokens(scope.user_id)
    since: dict[int, Any] = {}
    for rows in (_first_created(access), _first_created(_connection_history(scope.user_id, refresh))):
        for application_id, first in rows:
            since[application_id] = min(first, since.get(application_id, first))
    names = dict(get_application_model().objects.filter(pk__in=since).values_list("pk", "name"))
    calls = McpCall.objects.filter(user_id=scope.user_id, oauth_application_id__in=list(since)).order_by()
    last_call = dict(
        calls.values("oauth_application_id").annotate(last=Max("at")).values_list("oauth_application_id", "last")
    )
    return [
        {
            "id": application_id,
            "name": names.get(application_id, ""),
            "connected_at": first.isoformat(),
            "last_used_at": last_call[application_id].isoformat() if application_id in last_call else None,
        }
        for application_id, first in sorted(since.items(), key=lambda item: (item[1], item[0]), reverse=True)
    ]


def disconnect(actor: Actor, application_id: Any, *, impersonated: bool) -> None:
    """Revoke every access and refresh token, and every pending grant, of the signed-in user for one
    client. Not a client of theirs (another user's, already disconnected, no such id) is AppNotConnected.
    Only the checks of the session that asks: a user may always disconnect an app, whatever their rights."""
    scope = authorize_session(actor, impersonated=impersonated)
    try:
        pk = int(application_id)
    except (TypeError, ValueError):
        raise errors.AppNotConnected() from None
    AccessToken = get_access_token_model()
    with transaction.atomic(using=router.db_for_write(AccessToken)):
        access, refresh = (live.filter(application_id=pk) for live in _live_tokens(scope.user_id))
        if not access.exists() and not refresh.exists():
            raise errors.AppNotConnected()
        for token in refresh.select_for_update():
            token.revoke()  # the toolkit's own: marks it revoked, deletes its access token
        AccessToken.objects.filter(user_id=scope.user_id, application_id=pk).delete()
        get_grant_model().objects.filter(user_id=scope.user_id, application_id=pk).delete()


def _live_tokens(user_id: Any) -> tuple[QuerySet[Any], QuerySet[Any]]:
    """The user's access tokens of scope ``agent`` that have not expired, and refresh tokens not revoked
    whose access token has that scope: the site's other OAuth clients, if it has any, are not this page's."""
    access = get_access_token_model().objects.filter(
        has_scope(OAUTH_SCOPE), user_id=user_id, application__isnull=False, expires__gt=timezone.now()
    )
    refresh = get_refresh_token_model().objects.filter(
        has_scope(OAUTH_SCOPE, through="access_token__"), user_id=user_id, revoked__isnull=True
    )
    return access.order_by(), refresh.order_by()


def _connection_history(user_id: Any, live_refresh: QuerySet[Any]) -> QuerySet[Any]:
    """The live refresh tokens and those they rotated from (one family, since the consent): so a
    client that refreshes still shows when the user connected it."""
    families = live_refresh.exclude(token_family=None).values("token_family")
    # every refresh token of the user's: a rotated one has lost its access token
    history: QuerySet[Any] = get_refresh_token_model().objects.filter(user_id=user_id)
    return history.filter(Q(pk__in=live_refresh.values("pk")) | Q(token_family__in=families)).order_by()


def _first_created(tokens: QuerySet[Any]) -> QuerySet[Any]:
    firsts: QuerySet[Any] = tokens.values("application_id").annotate(first=Min("created"))
    return firsts.values_list("application_id", "first")
