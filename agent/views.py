"""The chat page and its small JSON API: every view calls a part's public function."""
from __future__ import annotations

import json
from functools import wraps
from typing import Any, Callable

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.utils import translation
from django.utils.translation import get_language
from django.views.decorators.http import require_GET, require_POST
from django.views.i18n import JavaScriptCatalog

from . import confirmations, conversations, errors, turns
from .access import SessionRef, authorize_session, is_impersonated, language_for
from .conf import agent_settings
from .models import UserSettings
from .rendering import page_view

PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"
"""Stands for a chat's or card's id in the URL patterns the page fills in."""

WEBSOCKET_PATH = "/ws/agent/"

STATUS_FOR = {
    errors.NotFound: 404,
    errors.InvalidCursor: 400,
    errors.Forbidden: 403,
    errors.Blocked: 403,
    errors.Busy: 409,
    errors.NotWaiting: 409,
    errors.Expired: 409,
    errors.TooManyTurns: 429,
    errors.BudgetExceeded: 429,
    errors.NotConfigured: 503,
}


def refusal_response(refusal: errors.Refusal) -> JsonResponse:
    """A refusal as JSON: its code, never a stack trace."""
    status = next((s for cls, s in STATUS_FOR.items() if isinstance(refusal, cls)), 401)
    return JsonResponse({"error": refusal.code}, status=status)


def api(view: Callable[..., Any]) -> Callable[..., HttpResponse]:
    """Session ref and impersonation for the view; refusals and invalid input mapped to JSON."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return JsonResponse({"error": "session_gone"}, status=401)
        ref = SessionRef.from_request(request)
        with translation.override(page_language(request)):
            try:
                return JsonResponse(view(request, ref, is_impersonated(request), *args, **kwargs))
            except errors.Refusal as refusal:
                return refusal_response(refusal)
            except ValidationError as invalid:
                fields = invalid.message_dict if hasattr(invalid, "error_dict") else {"__all__": invalid.messages}
                return JsonResponse({"error": "invalid", "fields": fields}, status=400)

    return wrapper


def page_language(request: HttpRequest) -> str:
    """The user's own language, else the request's (cookie, Accept-Language): as a turn picks it."""
    own = UserSettings.objects.filter(user_id=request.user.pk).first() if request.user.is_authenticated else None
    return language_for(own, get_language())


def _body(request: HttpRequest) -> dict[str, Any]:
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"{}")
        except ValueError:
            raise ValidationError({"__all__": ["The request body is not JSON."]}) from None
        if not isinstance(data, dict):
            raise ValidationError({"__all__": ["The request body must be a JSON object."]})
        return data
    return request.POST.dict()


@login_required
@require_GET
def chat(request: HttpRequest, conversation_id: Any = None) -> HttpResponse:
    """The chat page; its data comes over the API and the websocket, never inline."""
    try:
        scope = authorize_session(SessionRef.from_request(request), impersonated=is_impersonated(request))
    except errors.Refusal as refusal:
        with translation.override(page_language(request)):
            return render(request, "agent/unavailable.html", {"code": refusal.code}, status=403)
    context = {
        "open_conversation": conversation_id or "",
        "urls": _page_urls(),
        "websocket_path": WEBSOCKET_PATH,
        "login_url": resolve_url(settings.LOGIN_URL),
        "history_chars": agent_settings.HISTORY_CHARS,
        "language_pinned": bool(scope.user_settings is not None and scope.user_settings.language),
    }
    with translation.override(language_for(scope.user_settings, get_language())):
        return render(request, "agent/chat.html", context)


def _page_urls() -> dict[str, str]:
    """The URLs the page's script calls, with ``PLACEHOLDER_ID`` where an id goes."""
    with_id = {
        "detail": "conversation_detail", "rename": "conversation_rename", "archive": "conversation_archive",
        "delete": "conversation_delete", "messages": "message_list", "send": "turn_start", "stop": "turn_stop",
        "confirm": "confirmation_confirm", "cancel": "confirmation_cancel", "open": "chat_open",
    }
    urls = {key: reverse(f"agent:{name}", args=[PLACEHOLDER_ID]) for key, name in with_id.items()}
    return urls | {
        "list": reverse("agent:conversation_list"),
        "create": reverse("agent:conversation_create"),
        "chat": reverse("agent:chat"),
    }


_catalog = JavaScriptCatalog.as_view(packages=["agent"])


@require_GET
def javascript_catalog(request: HttpRequest) -> HttpResponseBase:
    """The page script's translations, in the same language as the page."""
    with translation.override(page_language(request)):
        return _catalog(request)


@require_GET
@api
def conversation_list(request: HttpRequest, ref: SessionRef, impersonated: bool) -> dict[str, Any]:
    page = conversations.list_conversations(
        ref, impersonated=impersonated, limit=_int(request.GET.get("limit"), 20), cursor=request.GET.get("cursor")
    )
    return {
        "conversations": [conversations.conversation_view(c) for c in page.conversations],
        "next_cursor": page.next_cursor,
    }


@require_POST
@api
def conversation_create(request: HttpRequest, ref: SessionRef, impersonated: bool) -> dict[str, Any]:
    title = _body(request).get("title")
    conversation = conversations.create_conversation(ref, {"title": title}, impersonated=impersonated)
    return {"conversation": conversations.conversation_view(conversation)}


@require_GET
@api
def conversation_detail(
    request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    _scope, conversation = conversations.authorize_conversation(ref, conversation_id, impersonated=impersonated)
    live = turns.live_turn(conversation.pk)
    return {
        "conversation": conversations.conversation_view(conversation),
        "turn": {"id": str(live.pk), "status": live.status} if live else None,
    }


@require_POST
@api
def conversation_rename(
    request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    title = _body(request).get("title")
    conversation = conversations.rename_conversation(ref, conversation_id, title, impersonated=impersonated)
    return {"conversation": conversations.conversation_view(conversation)}


@require_POST
@api
def conversation_archive(
    request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    conversation = conversations.archive_conversation(ref, conversation_id, impersonated=impersonated)
    return {"conversation": conversations.conversation_view(conversation)}


@require_POST
@api
def conversation_delete(
    request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    conversations.delete_conversation(ref, conversation_id, impersonated=impersonated)
    return {"deleted": conversation_id}


@require_GET
@api
def message_list(request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    messages = conversations.list_messages(
        ref, conversation_id, impersonated=impersonated,
        after=request.GET.get("after"), before=request.GET.get("before"),
        latest=request.GET.get("latest") in ("1", "true"), limit=_int(request.GET.get("limit"), 50),
    )
    return {"messages": [page_view(m) for m in messages]}


@require_POST
@api
def turn_start(request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    turn = turns.start(ref, conversation_id, _body(request).get("text"), impersonated=impersonated,
                       language=get_language())
    return {"turn": {"id": str(turn.pk), "status": turn.status}}


@require_POST
@api
def turn_stop(request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    return {"asked": turns.stop(ref, conversation_id, impersonated=impersonated)}


@require_POST
@api
def confirmation_confirm(
    request: HttpRequest, ref: SessionRef, impersonated: bool, confirmation_id: str
) -> dict[str, Any]:
    card = confirmations.confirm(ref, confirmation_id, impersonated=impersonated)
    return {"confirmation": {"id": str(card.pk), "status": card.status}}


@require_POST
@api
def confirmation_cancel(
    request: HttpRequest, ref: SessionRef, impersonated: bool, confirmation_id: str
) -> dict[str, Any]:
    card = confirmations.cancel(ref, confirmation_id, impersonated=impersonated)
    return {"confirmation": {"id": str(card.pk), "status": card.status}}


def _int(value: Any, default: int) -> Any:
    if value in (None, ""):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValidationError({"limit": ["The limit must be a positive integer."]}) from None
