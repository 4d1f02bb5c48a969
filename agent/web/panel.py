"""The "My assistant" page and its JSON API; each view calls ``agent.assistant``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import get_language
from django.views.decorators.http import require_GET, require_http_methods

from .. import assistant, errors
from ..access import SessionRef, authorize_session, is_impersonated, language_for
from ..conf import agent_settings
from .http import api, read_body, unavailable


@require_http_methods(["GET", "POST"])
@api
def settings_api(request: HttpRequest, ref: SessionRef, impersonated: bool) -> dict[str, Any]:
    """GET: the panel's data. POST (JSON): the user's changes, then the panel's data."""
    if request.method == "POST":
        return assistant.update(ref, read_body(request), impersonated=impersonated)
    return assistant.panel(ref, impersonated=impersonated)


@login_required
@require_GET
def page(request: HttpRequest) -> HttpResponse:
    """The panel at its own URL; its data comes over the API, never inline."""
    try:
        scope = authorize_session(SessionRef.from_request(request), impersonated=is_impersonated(request))
    except errors.Refusal as refusal:
        return unavailable(request, refusal)
    config = {"api_url": reverse("agent:assistant_api"), "max_instructions": agent_settings.MAX_INSTRUCTIONS_CHARS}
    context = {"config": config, "chat_url": reverse("agent:chat")}
    with translation.override(language_for(scope.user_settings, get_language())):
        return render(request, "agent/assistant.html", context)
