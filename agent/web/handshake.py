"""Who may open the chat page's socket, and in what language it first speaks: read from the handshake."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.utils.http import is_same_domain
from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header


class _SocketRequest(HttpRequest):
    """The socket's handshake as a Django request, for Django's own host and scheme rules
    (``ALLOWED_HOSTS``, ``USE_X_FORWARDED_HOST``, ``SECURE_PROXY_SSL_HEADER``)."""

    def __init__(self, scope: dict[str, Any]) -> None:
        super().__init__()
        self.socket_scheme = scope.get("scheme") or "ws"
        for name, value in scope.get("headers") or []:
            key = "HTTP_" + name.decode("latin-1").upper().replace("-", "_")
            text = value.decode("latin-1")
            self.META[key] = f"{self.META[key]},{text}" if key in self.META else text
        server = scope.get("server")
        if server:
            self.META["SERVER_NAME"], self.META["SERVER_PORT"] = str(server[0]), str(server[1] or "")

    def _get_scheme(self) -> str:
        return "https" if self.socket_scheme in ("wss", "https") else "http"


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the handshake's Origin is the site's own (scheme, host and port) or a trusted one,
    as Django's CSRF check decides for a form: a page on another port or scheme of an allowed
    host may not open a socket with the user's cookie."""
    request = _SocketRequest(scope)
    origin = request.META.get("HTTP_ORIGIN")
    if not origin:
        return False
    try:
        own = f"{'https' if request.is_secure() else 'http'}://{request.get_host()}"
    except DisallowedHost:
        own = None
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin == own or origin in {o for o in trusted if "*" not in o}:
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    wildcards = [urlsplit(o) for o in trusted if "*" in o]
    return any(w.scheme == parsed.scheme and is_same_domain(parsed.netloc, w.netloc.lstrip("*")) for w in wildcards)


def request_language(scope: dict[str, Any]) -> str | None:
    """The socket request's language, as Django's LocaleMiddleware reads it: cookie, then Accept-Language."""
    candidates = [scope.get("cookies", {}).get(settings.LANGUAGE_COOKIE_NAME) or ""]
    headers = dict(scope.get("headers") or [])
    accept = headers.get(b"accept-language", b"").decode("latin-1")
    candidates += [code for code, _q in parse_accept_lang_header(accept) if code != "*"]
    for code in filter(None, candidates):
        try:
            return get_supported_language_variant(code)
        except LookupError:
            continue
    return None
