"""The chat page and its small JSON API: every view calls a part's public function."""

from __future__ import annotations

from typing import Any

from django.conf import global_settings, settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import render, resolve_url
from django.urls import reverse, translate_url
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import get_language, get_language_info, gettext
from django.views.decorators.http import require_GET, require_POST
from django.views.i18n import JavaScriptCatalog

from .. import confirmations, conversations, turns, voice
from ..access import TELEGRAM_PERMISSION, SessionRef, authorize_session, is_impersonated, language_for
from ..ai import endpoints
from ..core import errors
from ..core.conf import agent_settings
from ..core.file_kinds import extensions_for
from ..models import Confirmation, UserSettings
from ..telegram import bot
from ..user_settings import choice_view
from .consumers import CLOSE_CODES, WEBSOCKET_PATH
from .http import api, body_id, page_language, read_body, strict_policy, unavailable
from .rendering import page_view

PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"
"""Stands for a chat's or card's id in the URL patterns the page fills in."""

SESSION_CODES = tuple(refusal.code for refusal in errors.SESSION_REFUSALS if refusal is not errors.ScopeRefused)
"""The refusal codes that mean the session ended: the page offers to sign in again (a site's own scope
check names its own codes, which the page cannot know ahead)."""


@strict_policy
@login_required
@require_GET
def chat(request: HttpRequest, conversation_id: str | None = None) -> HttpResponse:
    """The chat page; its data comes over the API and the websocket, never inline."""
    try:
        scope = authorize_session(SessionRef.from_request(request), impersonated=is_impersonated(request))
    except errors.Refusal as refusal:
        return unavailable(request, refusal)
    logout_url = agent_settings.LOGOUT_URL
    context: dict[str, Any] = {"logout_url": resolve_url(logout_url) if logout_url else ""}
    language = language_for(scope.user_settings, get_language())
    with translation.override(language):
        context["model"] = choice_view(endpoints.effective(request.user, user_settings=scope.user_settings))
        context["telegram_offered"] = bot.config() is not None and scope.has_perm(TELEGRAM_PERMISSION)
        context["config"] = page_config(
            conversation_id or "", voice_offered=voice.available(scope.user, scope.user_settings)
        )
        return render(request, "agent/chat.html", context)


def page_config(open_conversation: str, *, voice_offered: bool = False) -> dict[str, Any]:
    """Every fact the chat page's script needs, read from the settings and the server's own tables,
    rendered once as JSON (``json_script``), so no limit, code or sentence is kept twice.

    Call it in the user's language: the sentences for situations the page meets on its own (a
    chat found gone, a socket closed for a session that ended) are the server's refusal messages.
    ``voice_offered``: the user has a speech model, so the page offers its microphone.
    """
    page_codes = ("not_found", "forbidden", *SESSION_CODES)
    return {
        "open_conversation": open_conversation,
        "urls": _page_urls(),
        "placeholder": PLACEHOLDER_ID,
        "websocket_path": "/" + WEBSOCKET_PATH,
        "login_url": resolve_url(settings.LOGIN_URL),
        "messages_page": agent_settings.MESSAGES_PAGE,
        "history_chars": agent_settings.HISTORY_CHARS,
        "attachment_text_chars": agent_settings.ATTACHMENT_TEXT_CHARS,
        "max_title_chars": agent_settings.MAX_TITLE_CHARS,
        "search_max_chars": conversations.SEARCH_MAX_CHARS,
        "max_file_bytes": agent_settings.MAX_FILE_BYTES,
        "max_files": agent_settings.MAX_FILES_PER_MESSAGE,
        "accepted_extensions": accepted_extensions(),
        "suggestions": [str(phrase) for phrase in agent_settings.STARTER_SUGGESTIONS],
        "voice": voice_offered,
        "max_voice_s": agent_settings.MAX_VOICE_S,
        "session_codes": list(SESSION_CODES),
        "close_codes": CLOSE_CODES,
        "messages": {code: str(errors.refusal_named(code).message) for code in page_codes},
    }


def accepted_extensions() -> list[str]:
    """The file name endings the composer offers: those whose type the site accepts."""
    return extensions_for(agent_settings.ACCEPTED_TYPES)


def offered_languages() -> list[tuple[str, str]]:
    """The languages a user may pick: the site's ``LANGUAGES`` when it chose them.

    A site that never set ``LANGUAGES`` speaks ``LANGUAGE_CODE`` only, not
    Django's list of every language it knows.
    """
    if list(settings.LANGUAGES) != list(global_settings.LANGUAGES):
        return [(code, str(name)) for code, name in settings.LANGUAGES]
    code = settings.LANGUAGE_CODE
    return [(code, get_language_info(code)["name_local"])]


@require_POST
def language(request: HttpRequest) -> HttpResponse:
    """The language picker: saved as the user's own setting, and set as Django's ``set_language`` sets it.

    The saved setting is what the page, the socket and the turns read first, so
    the choice holds in every tab, with or without ``LocaleMiddleware``.
    """
    code = request.POST.get("language", "")
    if code not in dict(offered_languages()):
        return HttpResponseBadRequest(gettext("This language is not offered."), content_type="text/plain")
    if request.user.is_authenticated and not is_impersonated(request):
        UserSettings.objects.update_or_create(user=request.user, defaults={"language": code})
    next_url = request.POST.get("next") or request.headers.get("referer")
    if not next_url or not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        next_url = reverse("agent:chat")
    response = HttpResponseRedirect(translate_url(next_url, code))
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        code,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN,
        secure=settings.LANGUAGE_COOKIE_SECURE,
        httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
        samesite=settings.LANGUAGE_COOKIE_SAMESITE,
    )
    return response


def _page_urls() -> dict[str, str]:
    """The URLs the page's script calls, with ``PLACEHOLDER_ID`` where an id goes."""
    with_id = {
        "detail": "conversation_detail",
        "rename": "conversation_rename",
        "archive": "conversation_archive",
        "restore": "conversation_restore",
        "delete": "conversation_delete",
        "messages": "message_list",
        "send": "turn_start",
        "stop": "turn_stop",
        "edit": "turn_edit",
        "regenerate": "turn_regenerate",
        "switch": "version_switch",
        "confirm": "confirmation_confirm",
        "cancel": "confirmation_cancel",
        "open": "chat_open",
        "files": "attachment_list",
        "upload": "attachment_upload",
        "unattach": "attachment_remove",
        "file": "attachment_file",
        "transcribe": "transcribe",
    }
    urls = {key: reverse(f"agent:{name}", args=[PLACEHOLDER_ID]) for key, name in with_id.items()}
    return urls | {
        "list": reverse("agent:conversation_list"),
        "create": reverse("agent:conversation_create"),
        "chat": reverse("agent:chat"),
        "events": reverse("agent:events"),
    }


_catalog = JavaScriptCatalog.as_view(packages=["agent"])


@require_GET
def javascript_catalog(request: HttpRequest) -> HttpResponseBase:
    """The page script's translations, in the same language as the page."""
    with translation.override(page_language(request)):
        return _catalog(request)


@require_GET
@api
def conversation_list(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    """The chat list: active chats, the archived ones (``archived=1``), or those matching ``q``."""
    paging: dict[str, Any] = {**_limit(request.GET.get("limit")), "cursor": request.GET.get("cursor")}
    if "q" in request.GET:
        page = conversations.search_conversations(actor, request.GET["q"], impersonated=impersonated, **paging)
    else:
        archived = request.GET.get("archived") in ("1", "true")
        page = conversations.list_conversations(actor, impersonated=impersonated, archived=archived, **paging)
    return {
        "conversations": [conversations.conversation_view(c) for c in page.conversations],
        "next_cursor": page.next_cursor,
    }


@require_POST
@api
def conversation_create(request: HttpRequest, actor: SessionRef, impersonated: bool) -> dict[str, Any]:
    title = read_body(request).get("title")
    conversation = conversations.create_conversation(actor, {"title": title}, impersonated=impersonated)
    return {"conversation": conversations.conversation_view(conversation)}


@require_GET
@api
def conversation_detail(
    request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    _scope, conversation = conversations.authorize_conversation(actor, conversation_id, impersonated=impersonated)
    live = turns.live_turn(conversation.pk)
    return {
        "conversation": conversations.conversation_view(conversation),
        "turn": {"id": str(live.pk), "status": live.status} if live else None,
    }


@require_POST
@api
def conversation_rename(
    request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    title = read_body(request).get("title")
    conversation = conversations.rename_conversation(actor, conversation_id, title, impersonated=impersonated)
    return {"conversation": conversations.conversation_view(conversation)}


@require_POST
@api
def conversation_archive(
    request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    conversation = conversations.archive_conversation(actor, conversation_id, impersonated=impersonated)
    return {"conversation": conversations.conversation_view(conversation)}


@require_POST
@api
def conversation_restore(
    request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    conversation = conversations.restore_conversation(actor, conversation_id, impersonated=impersonated)
    return {"conversation": conversations.conversation_view(conversation)}


@require_POST
@api
def conversation_delete(
    request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    conversations.delete_conversation(actor, conversation_id, impersonated=impersonated)
    return {"deleted": conversation_id}


@require_GET
@api
def message_list(request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    messages = conversations.list_messages(
        actor,
        conversation_id,
        impersonated=impersonated,
        after=request.GET.get("after"),
        before=request.GET.get("before"),
        latest=request.GET.get("latest") in ("1", "true"),
        **_limit(request.GET.get("limit")),
    )
    return {"messages": [page_view(m) for m in messages]}


@require_POST
@api
def turn_start(request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    body = read_body(request)
    turn = turns.start(
        actor,
        conversation_id,
        body.get("text"),
        attachment_ids=body.get("attachment_ids") or (),
        impersonated=impersonated,
        language=get_language(),
    )
    return {"turn": {"id": str(turn.pk), "status": turn.status}}


@require_POST
@api
def turn_stop(request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    return {"asked": turns.stop(actor, conversation_id, impersonated=impersonated)}


@require_POST
@api
def turn_edit(request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    """A new version of one of the user's messages (``message``, ``text``, optional ``attachment_ids``)."""
    body = read_body(request)
    turn = turns.edit_message(
        actor,
        conversation_id,
        body_id(body, "message"),
        body.get("text"),
        attachment_ids=body.get("attachment_ids"),
        impersonated=impersonated,
        language=get_language(),
    )
    return {"turn": {"id": str(turn.pk), "status": turn.status}}


@require_POST
@api
def turn_regenerate(
    request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str
) -> dict[str, Any]:
    """Another answer to the user's message that ``message`` answers."""
    turn = turns.regenerate(
        actor,
        conversation_id,
        body_id(read_body(request), "message"),
        impersonated=impersonated,
        language=get_language(),
    )
    return {"turn": {"id": str(turn.pk), "status": turn.status}}


@require_POST
@api
def version_switch(request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str) -> dict[str, Any]:
    """Show the version that holds ``message``."""
    changed = turns.switch_version(
        actor, conversation_id, body_id(read_body(request), "message"), impersonated=impersonated
    )
    return {"changed": changed}


@require_POST
@api
def confirmation_confirm(
    request: HttpRequest, actor: SessionRef, impersonated: bool, confirmation_id: str
) -> dict[str, Any]:
    """Confirm the card, with the user's ``edits`` if any. Edits its checks refuse are an answer, as a
    Django form re-shown with its errors is: the card still waits and ``refused`` says why by field (a
    200, so the page's console records no failure for what the user is expected to fix)."""
    edits = read_body(request).get("edits")
    try:
        confirmation = confirmations.confirm(actor, confirmation_id, impersonated=impersonated, edits=edits)
    except ValidationError as invalid:
        if not edits:
            raise
        waiting = {"id": str(confirmation_id), "status": Confirmation.Status.WAITING.value, "edited": False}
        return {"confirmation": waiting, "refused": errors.invalid_body(invalid)}
    return {
        "confirmation": {"id": str(confirmation.pk), "status": confirmation.status, "edited": bool(confirmation.edits)}
    }


@require_POST
@api
def confirmation_cancel(
    request: HttpRequest, actor: SessionRef, impersonated: bool, confirmation_id: str
) -> dict[str, Any]:
    confirmation = confirmations.cancel(actor, confirmation_id, impersonated=impersonated)
    return {"confirmation": {"id": str(confirmation.pk), "status": confirmation.status}}


def _limit(value: Any) -> dict[str, int]:
    """The ``limit`` a page asks for, if it asks: without one, the setting's page size applies."""
    if value in (None, ""):
        return {}
    try:
        return {"limit": int(value)}
    except (TypeError, ValueError):
        raise ValidationError({"limit": [gettext("The limit must be a positive integer.")]}) from None
