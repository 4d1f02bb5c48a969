"""A request of the live session, for the site's own code that takes one: DRF views, forms, helpers.

A tool runs in a worker, far from any browser request; what it is given instead is a real
``HttpRequest`` whose user, session and language are the live session's, so the site's own
checks see exactly the user who asked. It is never a second way in: the session was checked
by the caller (the turn's step or the click) just before.
"""

from __future__ import annotations

import io
import json
from importlib import import_module
from typing import Any, Mapping
from urllib.parse import urlencode

from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest

from ..access import Scope, SessionRef


def live_request(
    scope: Scope,
    *,
    method: str = "GET",
    path: str = "/",
    query: Mapping[str, Any] | None = None,
    data: Any = None,
    csrf_checked: bool = False,
) -> WSGIRequest:
    """A request as the session's browser would send it: ``data`` as a JSON body.

    ``csrf_checked`` marks a request made for a change the user has already asked for through a
    CSRF-checked request of ours (the card's Confirm) or that changes nothing (a card's preview):
    only those skip the CSRF check of the site's views, which a request built here could not pass.
    """
    body = b"" if data is None else json.dumps(data, default=str).encode()
    host = site_host()
    environ = {
        "REQUEST_METHOD": method.upper(),
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": urlencode(query or {}, doseq=True),
        "SERVER_NAME": host,
        "SERVER_PORT": "443" if _secure() else "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": host,
        "HTTP_ACCEPT": "application/json",
        "HTTP_ACCEPT_LANGUAGE": scope.language,
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.url_scheme": "https" if _secure() else "http",
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json" if body else "",
    }
    request = WSGIRequest(environ)
    request.user = scope.user
    session_key = scope.actor.session_key if isinstance(scope.actor, SessionRef) else None  # a Telegram link has none
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    request.LANGUAGE_CODE = scope.language
    if csrf_checked:
        request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]  # Django's own switch
    return request


def site_host() -> str:
    """A host the site serves (its first ``ALLOWED_HOSTS`` entry), so absolute URLs it builds are its own."""
    for entry in settings.ALLOWED_HOSTS:
        if entry and entry != "*":
            return entry.lstrip(".")
    return "localhost"


def _secure() -> bool:
    return bool(settings.SESSION_COOKIE_SECURE)
