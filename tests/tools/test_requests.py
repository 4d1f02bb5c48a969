"""A tool's requests of the live session: ``ctx.request`` and ``ctx.request_for(...)``, which the
site's own views take as they take the user's requests."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from django.core.cache import cache
from django.urls import resolve

from agent import confirmations
from agent.access import authorize_session
from agent.models import Confirmation
from agent.tools import execute_as
from agent.tools.registry import Refused, ToolContext
from tests.notes.models import Note

pytestmark = pytest.mark.django_db
Status = Confirmation.Status


def the_sites_view(request: Any) -> Any:
    """The site's own view for the request's path, run as Django would run it."""
    match = resolve(request.path_info)
    return match.func(request, *match.args, **match.kwargs)


def test_a_request_for_carries_the_method_path_query_and_body_of_the_live_session(ref, user, chat):
    scope = authorize_session(ref, impersonated=False)
    ctx = ToolContext(user, scope, chat, None, "et")

    request = ctx.request_for("POST", "/api/notes/", query={"format": "json"}, data={"title": "Oat milk"})

    assert (request.method, request.path, request.GET["format"]) == ("POST", "/api/notes/", "json")
    assert json.loads(request.body) == {"title": "Oat milk"} and request.content_type == "application/json"
    assert request.user == user and request.session.session_key == ref.session_key
    assert request.LANGUAGE_CODE == scope.language
    assert ctx.request.method == "GET"  # the plain one stays a GET


@pytest.fixture
def add_through_the_api(declare: Callable[..., Any]) -> None:
    """A hand-written write tool that makes a note through the site's own API view."""

    def notes_add_via_api(ctx: ToolContext, title: str) -> Any:
        response = the_sites_view(ctx.request_for("POST", "/api/notes/", data={"title": title}, csrf_checked=True))
        if response.status_code != 201:
            raise Refused("denied", {"error": "refused", "status": response.status_code, "data": response.data})
        return response.data

    declare(
        notes_add_via_api,
        name="notes_add_via_api",
        kind="write",
        module="notes",
        parameters={
            "type": "object",
            "properties": {"title": {"type": "string"}},
            "required": ["title"],
            "additionalProperties": False,
        },
        preview=lambda ctx, title: {"title": title},
    )
    cache.clear()  # the API's throttle counts


def test_a_write_tool_posts_to_the_sites_view_as_the_user_at_confirm(ref, user, chat, add_through_the_api):
    scope = authorize_session(ref, impersonated=False)
    confirmation = execute_as(
        scope, "notes_add_via_api", {"title": "Oat milk"}, via="agent", chat=chat, call_id="c"
    ).confirmation
    assert not Note.objects.exists()

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE

    assert list(Note.objects.values_list("owner", "title")) == [(user.pk, "Oat milk")]


def test_without_csrf_checked_the_sites_view_refuses_a_post_it_cannot_tell_from_a_forgery(ref, user, chat):
    ctx = ToolContext(user, authorize_session(ref, impersonated=False), chat, None, "en")

    response = the_sites_view(ctx.request_for("POST", "/api/notes/", data={"title": "Oat milk"}))

    assert response.status_code == 403 and "CSRF" in str(response.data["detail"])
    assert not Note.objects.exists()
