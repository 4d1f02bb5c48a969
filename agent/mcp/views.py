"""The MCP endpoint (``agent:mcp``) and its protected-resource metadata (RFC 9728).

Each request is checked first, here: the bearer token (a personal one, or where OAuth is on an
OAuth access token of scope ``agent``), its user, ``agent.use_agent`` and ``agent.use_mcp``, in the
one statement of ``agent.access``. A request without a live token is 401 with ``WWW-Authenticate``
naming the metadata, so a client learns where to sign in; a user who may not use MCP is 403. Then
the SDK's stateless server for that caller answers it, in this request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from ..access import OAUTH_SCOPE as SCOPE
from ..access import Scope, authorize_session
from ..core import errors
from . import server, tokens


@csrf_exempt  # a bearer token, never a cookie: nothing a cross-site form could borrow
async def endpoint(request: HttpRequest) -> HttpResponse:
    """Streamable HTTP, one request at a time, for the token's user as their rights stand now."""
    secret = _bearer(request)
    if not secret:
        return _unauthorized(request, "")
    try:
        scope = await sync_to_async(_authorize)(secret)
    except (errors.SessionGone, errors.Inactive, errors.ScopeRefused):
        return _unauthorized(request, "invalid_token")
    except errors.Refusal as refusal:
        response = JsonResponse({"error": refusal.code, "message": refusal.message}, status=403)
        response["WWW-Authenticate"] = f'Bearer error="insufficient_scope", scope="{SCOPE}"'
        return response
    caller = server.Caller(scope=scope, site=tokens.origin(request))
    manager = server.manager_for(caller)
    async with manager.run():
        return await _served(manager.handle_request, request)


@require_GET
def metadata(request: HttpRequest, resource: str = "") -> JsonResponse:
    """The protected resource's metadata (RFC 9728): what it is, and who issues its tokens: this
    site, where OAuth is on (its metadata at ``/.well-known/oauth-authorization-server``); else no
    one, as tokens are made on "My assistant"."""
    data: dict[str, Any] = {
        "resource": request.build_absolute_uri(reverse("agent:mcp")),
        "bearer_methods_supported": ["header"],
        "scopes_supported": [SCOPE],
        "resource_name": _("The assistant's tools"),
    }
    if tokens.oauth_on():
        data["authorization_servers"] = [tokens.origin(request)]
    return JsonResponse(data)


def _authorize(secret: str) -> Scope:
    return authorize_session(tokens.ref_for(secret), impersonated=False)


def _bearer(request: HttpRequest) -> str:
    kind, _space, secret = request.headers.get("Authorization", "").partition(" ")
    return secret.strip() if kind.lower() == "bearer" else ""


def _unauthorized(request: HttpRequest, error: str) -> HttpResponse:
    where = request.build_absolute_uri(reverse("agent:mcp_metadata"))
    challenge = f'Bearer resource_metadata="{where}", scope="{SCOPE}"'
    if error:
        challenge += f', error="{error}"'
    response = JsonResponse({"error": error or "unauthorized", "message": _("Sign in with a token.")}, status=401)
    response["WWW-Authenticate"] = challenge
    return response


async def _served(app: Any, request: HttpRequest) -> HttpResponse:
    """The response an ASGI app gives this request (the SDK's server answers in JSON, whole)."""
    scope = dict(request.scope)  # type: ignore[attr-defined]  # an ASGIRequest's: the site serves MCP over ASGI
    body, done = request.body, asyncio.Event()
    started: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if not started.setdefault("read", False):
            started["read"] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # nothing more comes; the app is done with the request by then
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started["status"], started["headers"] = message["status"], message.get("headers", [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    response = HttpResponse(b"".join(chunks), status=started.get("status", 500))
    for name, value in started.get("headers", []):
        if name.lower() != b"content-length":
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response
