"""The JSON API's one request/response helper: the session, the language, the CSRF check and the error contract;
and the pages' strict Content-Security-Policy.

Every API view is wrapped in ``api``: it gets the session's actor and whether the
session is impersonated, runs in the user's language, and whatever it raises
reaches the client as the body ``agent.core.errors`` defines (``error``, ``message``
and ``fields`` or ``limit``), with the refusal's HTTP status.
"""

from __future__ import annotations

import json
from functools import wraps
from importlib import import_module
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.core.exceptions import RequestDataTooBig, ValidationError
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.response import HttpResponseBase
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render, resolve_url
from django.utils import translation
from django.utils.translation import get_language, gettext
from django.views.decorators.csrf import csrf_exempt

from ..access import SessionRef, is_impersonated, language_for
from ..core import errors
from ..models import UserSettings

POLICY_DIRECTIVES: dict[str, list[str]] = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "connect-src": ["'self'", "ws:", "wss:"],
    "frame-ancestors": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "object-src": ["'none'"],
}
"""The assistant's pages' policy: no inline script or style; in the form of Django's ``SECURE_CSP``."""

POLICY = "; ".join(f"{directive} {' '.join(sources)}" for directive, sources in POLICY_DIRECTIVES.items())


def strict_policy(view: Callable[..., Any]) -> Callable[..., Any]:
    """A page that keeps the assistant's policy where the site turns on Django's own CSP (Django 6+).

    Django's ``ContentSecurityPolicyMiddleware`` then sends this policy on the page in
    place of the site's ``SECURE_CSP``, and no ``SECURE_CSP_REPORT_ONLY`` policy beside it,
    wherever either middleware stands in ``MIDDLEWARE``. On Django 5.2 the view is
    unchanged: ``agent.middleware.ContentSecurityPolicyMiddleware`` sets the policy.
    """
    try:
        csp = import_module("django.views.decorators.csp")
    except ImportError:
        return view
    page: Callable[..., Any] = csp.csp_report_only_override({})(csp.csp_override(POLICY_DIRECTIVES)(view))
    return page


INVALID_STATUS = {"file_too_large": 413, "unsupported_type": 415, "too_many_files": 409, "voice_too_large": 413}
"""Invalid input answered with a status of its own: a file's size, type or count; a recording's size."""

MULTIPART_OVERHEAD = 64 * 1024
"""Room for the multipart headers around a file in a request's declared length."""


def api(view: Callable[..., Any]) -> Callable[..., HttpResponseBase]:
    """The session's actor and impersonation for the view; its dict answered as JSON, every failure as the error body.

    The CSRF check runs here instead of in the site's middleware, so a refused
    token gets the JSON the page reads whatever ``CSRF_FAILURE_VIEW`` the site
    has. A view may return a response of its own (a file, a 201).
    """

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        with translation.override(page_language(request)):
            try:
                if csrf_refused(request):
                    return refusal_response(errors.StalePage())
                if not request.user.is_authenticated:
                    return refusal_response(errors.SessionGone())
                answer = view(request, SessionRef.from_request(request), is_impersonated(request), *args, **kwargs)
                return answer if isinstance(answer, HttpResponseBase) else JsonResponse(answer)
            except errors.Refusal as refusal:
                return refusal_response(refusal)
            except ValidationError as invalid:
                return invalid_response(invalid)
            except RequestDataTooBig:  # over DATA_UPLOAD_MAX_MEMORY_SIZE, raised where the body is read
                return refusal_response(errors.TooLarge())

    return csrf_exempt(wrapper)


class SizeCap(FileUploadHandler):
    """Stops reading an upload as soon as it passes ``limit`` bytes, whatever the request declared."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.too_large = False

    @classmethod
    def install(cls, request: HttpRequest, limit: int) -> "SizeCap | None":
        """A cap put first among the request's upload handlers; None when the request declares a body
        over the limit already (refuse it before it is read)."""
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > limit + MULTIPART_OVERHEAD:
            return None
        cap = cls(request, limit)
        request.upload_handlers = [cap, *request.upload_handlers]
        return cap

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.too_large = True
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def refusal_response(refusal: errors.Refusal) -> JsonResponse:
    """A refusal as JSON: the error body and its class's status, never a stack trace."""
    return JsonResponse(errors.error_body(refusal), status=refusal.http_status)


def invalid_response(invalid: ValidationError) -> JsonResponse:
    """Invalid input as JSON: 400, or the status its code has of its own."""
    body = errors.invalid_body(invalid)
    return JsonResponse(body, status=INVALID_STATUS.get(body["error"], 400))


def csrf_refused(request: HttpRequest) -> bool:
    """Django's own CSRF check, run for an API call: True when it refuses the request.

    The check is ``CsrfViewMiddleware``'s, so it logs a refusal as usual; only
    the answer differs.
    """
    check = CsrfViewMiddleware(_never_called)
    check.process_request(request)  # reads the cookie, as the middleware did (or would have)
    return check.process_view(request, _never_called, (), {}) is not None


def _never_called(request: HttpRequest) -> HttpResponse:
    raise AssertionError("stands in for a view in the CSRF check; never called")


def page_language(request: HttpRequest) -> str:
    """The user's own language, else the request's (cookie, Accept-Language): as a turn picks it."""
    own = UserSettings.objects.filter(user_id=request.user.pk).first() if request.user.is_authenticated else None
    return language_for(own, get_language())


def body_id(body: dict[str, Any], key: str) -> str:
    """The id the client sent as ``key``, as text; "" when it sent none or not text (the door finds no such row)."""
    value = body.get(key)
    return value if isinstance(value, str) else ""


def read_body(request: HttpRequest) -> dict[str, Any]:
    """The request's fields: a JSON object, or a form's fields."""
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"{}")
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            raise ValidationError({"__all__": [gettext("The request body is not JSON.")]}) from None
        if not isinstance(data, dict):
            raise ValidationError({"__all__": [gettext("The request body must be a JSON object.")]})
        return data
    return request.POST.dict()


def login_link(next_path: str) -> str:
    """``LOGIN_URL`` (a URL name or a URL) with ``next``, as ``redirect_to_login`` builds it."""
    scheme, netloc, path, query, fragment = urlsplit(resolve_url(settings.LOGIN_URL))
    params = QueryDict(query, mutable=True)
    params[REDIRECT_FIELD_NAME] = next_path
    return urlunsplit((scheme, netloc, path, params.urlencode(safe="/"), fragment))


def unavailable(request: HttpRequest, refusal: errors.Refusal) -> HttpResponse:
    """A page of the assistant refused to this session: why, in the user's language, and a way to sign in."""
    with translation.override(page_language(request)):
        context = {"code": refusal.code, "message": refusal.message, "login_url": login_link(request.get_full_path())}
        return render(request, "agent/unavailable.html", context, status=403)
