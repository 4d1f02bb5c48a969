"""A strict Content-Security-Policy for the chat page: no inline script or style."""

from __future__ import annotations

from typing import Callable

from django.http import HttpRequest, HttpResponse

from .http import POLICY


class ContentSecurityPolicyMiddleware:
    """Sets the policy on the assistant's pages (``agent:*``) unless a site sets its own.

    Beside Django's own ``ContentSecurityPolicyMiddleware`` (Django 6+), in either order, the
    assistant's pages get one policy, this one (``http.strict_policy``); the site's other pages
    get the site's."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.namespace == "agent" and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = POLICY
        return response
