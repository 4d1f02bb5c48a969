"""The page's JSON API: refusals as status codes with ``{"error": code, "message": why}``, CSRF on every write."""

from __future__ import annotations

import uuid
from importlib import import_module
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpResponseForbidden
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from agent import turns
from agent.conversations import create_conversation
from agent.core import errors
from agent.models import Conversation, Turn, UserSettings
from agent.tasks import run_turn
from agent.web.http import refusal_response
from tests.support.factories import ConversationFactory, UserSettingsFactory
from tests.support.model_server import answer, tool_calls
from tests.support.sessions import login

pytestmark = pytest.mark.django_db


def post(client: Client, name: str, *args: Any, **body: Any) -> Any:
    return client.post(reverse(f"agent:{name}", args=args), body, content_type="application/json")


def get(client: Client, name: str, *args: Any, **query: Any) -> Any:
    return client.get(reverse(f"agent:{name}", args=args), query)


def test_an_anonymous_call_is_401_session_gone():
    response = get(Client(), "conversation_list")
    assert response.status_code == 401 and response.json()["error"] == "session_gone"


def test_a_call_after_the_session_ended_is_401(session):
    client, ref = session
    import_module(settings.SESSION_ENGINE).SessionStore(session_key=ref.session_key).delete()
    response = post(client, "conversation_create")
    assert response.status_code == 401 and response.json()["error"] == "session_gone"


def test_a_user_without_the_permission_is_403_forbidden():
    from tests.support.factories import UserFactory

    client, _ref = login(UserFactory())
    response = get(client, "conversation_list")
    assert response.status_code == 403 and response.json()["error"] == "forbidden"


@pytest.mark.parametrize(
    "method, name",
    [
        (get, "conversation_detail"),
        (get, "message_list"),
        (post, "conversation_rename"),
        (post, "conversation_archive"),
        (post, "conversation_delete"),
        (post, "turn_start"),
        (post, "turn_stop"),
        (post, "turn_edit"),
        (post, "turn_regenerate"),
        (post, "version_switch"),
    ],
)
def test_someone_elses_chat_is_404_like_a_missing_one(session, method, name):
    client, _ref = session
    theirs = ConversationFactory()
    answers = [method(client, name, chat_id, title="x", text="hi") for chat_id in (theirs.pk, "not-a-uuid")]
    assert [(r.status_code, r.json()["error"]) for r in answers] == [(404, "not_found")] * 2
    theirs.refresh_from_db()
    assert theirs.title != "x" and theirs.status == Conversation.Status.ACTIVE


def test_a_listed_chat_page_and_cursor(session, ref):
    client, _ref = session
    for n in range(3):
        create_conversation(ref, {"title": f"c{n}"}, impersonated=False)
    first = get(client, "conversation_list", limit=2).json()
    rest = get(client, "conversation_list", limit=2, cursor=first["next_cursor"]).json()
    assert [c["title"] for c in first["conversations"] + rest["conversations"]] == ["c2", "c1", "c0"]
    assert rest["next_cursor"] is None


def test_a_bad_cursor_is_400_invalid_cursor(session):
    client, _ref = session
    response = get(client, "conversation_list", cursor="garbage")
    assert response.status_code == 400 and response.json()["error"] == "invalid_cursor"


def test_invalid_input_is_400_with_the_field(session, chat):
    client, _ref = session
    response = post(client, "conversation_rename", chat.pk, title="  ")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid" and "title" in response.json()["fields"]


@pytest.mark.parametrize("name", ["conversation_create", "assistant_api"])
def test_a_body_nested_too_deep_is_400_invalid_not_a_server_error(session, name):
    client, _ref = session
    response = client.post(reverse(f"agent:{name}"), "[" * 60_000, content_type="application/json")
    assert response.status_code == 400 and response.json()["error"] == "invalid"


def test_send_without_a_model_is_503_endpoint_not_configured(session, chat):
    client, _ref = session
    response = post(client, "turn_start", chat.pk, text="hello")
    assert response.status_code == 503 and response.json()["error"] == "endpoint_not_configured"


def test_a_second_send_while_a_turn_runs_is_409_busy(session, chat, endpoint):
    client, _ref = session
    first = post(client, "turn_start", chat.pk, text="hello")
    assert first.status_code == 200 and first.json()["turn"]["status"] == "queued"
    second = post(client, "turn_start", chat.pk, text="again")
    assert second.status_code == 409 and second.json()["error"] == "busy"


def test_more_turns_than_allowed_at_once_is_429_too_many_turns(session, ref, endpoint):
    client, _ref = session
    chats = [create_conversation(ref, {}, impersonated=False) for _ in range(4)]
    codes = [post(client, "turn_start", c.pk, text="hello").status_code for c in chats]
    assert codes == [200, 200, 200, 429]
    refused = post(client, "turn_start", chats[3].pk, text="hello").json()
    assert refused["error"] == "too_many_turns" and refused["limit"]["cap"] == "3"  # with its limit (tests/assistant)


def test_the_detail_shows_the_live_turn(session, chat, endpoint):
    client, _ref = session
    turn_id = post(client, "turn_start", chat.pk, text="hello").json()["turn"]["id"]
    detail = get(client, "conversation_detail", chat.pk).json()
    assert detail["conversation"]["id"] == str(chat.pk) and detail["turn"] == {"id": turn_id, "status": "queued"}


def test_rename_archive_delete_then_the_chat_is_gone(session, chat):
    client, _ref = session
    assert post(client, "conversation_rename", chat.pk, title="Renamed").json()["conversation"]["title"] == "Renamed"
    assert post(client, "conversation_archive", chat.pk).json()["conversation"]["status"] == "archived"
    assert get(client, "conversation_list").json()["conversations"] == []
    assert post(client, "conversation_delete", chat.pk).json() == {"deleted": str(chat.pk)}
    assert get(client, "conversation_detail", chat.pk).status_code == 404


def test_reads_are_get_only_and_writes_post_only(session, chat):
    client, _ref = session
    assert client.post(reverse("agent:message_list", args=[chat.pk])).status_code == 405
    assert client.get(reverse("agent:conversation_delete", args=[chat.pk])).status_code == 405
    chat.refresh_from_db()
    assert chat.status == Conversation.Status.ACTIVE


def test_writes_need_the_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    refused = client.post(reverse("agent:conversation_create"), {}, content_type="application/json")
    assert refused.status_code == 403 and not Conversation.objects.exists()
    client.get(reverse("agent:chat"))  # the page sets the CSRF cookie
    token = client.cookies[settings.CSRF_COOKIE_NAME].value
    accepted = client.post(
        reverse("agent:conversation_create"), {}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert accepted.status_code == 200 and Conversation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_cards_confirm_once_and_refuse_others(ref, session, endpoint, model_server, make_user):
    client, _ref = session
    chat = create_conversation(ref, {}, impersonated=False)
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    run_turn(str(turns.start(ref, chat.pk, "note: buy milk", impersonated=False).pk))
    messages = get(client, "message_list", chat.pk, latest="1").json()["messages"]
    (confirmation,) = [m["confirmation"] for m in messages if m["confirmation"]]
    assert confirmation["status"] == "waiting" and confirmation["preview"]["title"] == "Buy milk"

    stranger, _ = login(make_user("notes.add_note"))
    assert post(stranger, "confirmation_confirm", confirmation["id"]).json()["error"] == "not_found"
    done = post(client, "confirmation_confirm", confirmation["id"])
    assert done.status_code == 200 and done.json()["confirmation"] == {
        "id": confirmation["id"],
        "status": "done",
        "edited": False,
    }
    again = post(client, "confirmation_cancel", confirmation["id"])
    assert again.status_code == 409 and again.json()["error"] == "not_waiting"


@pytest.mark.django_db(transaction=True)
def test_messages_carry_the_answer_html_and_the_notice_text_in_the_users_language(
    ref, session, user, endpoint, model_server
):
    client, _ref = session
    UserSettingsFactory(user=user, language="en")
    chat = create_conversation(ref, {}, impersonated=False)
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    run_turn(str(turns.start(ref, chat.pk, "note: buy milk", impersonated=False).pk))
    messages = get(client, "message_list", chat.pk, latest="1").json()["messages"]
    confirmation_id = next(m["confirmation"]["id"] for m in messages if m["confirmation"])
    post(client, "confirmation_cancel", confirmation_id)
    url = reverse("agent:message_list", args=[chat.pk])
    last = client.get(url, {"after": messages[-1]["id"]}, headers={"accept-language": "ru"}).json()["messages"]
    (notice,) = last
    assert notice["notice_code"] == "confirmation_cancelled"
    assert notice["confirmation"] == {"id": confirmation_id, "status": "cancelled", "edited": False}
    assert notice["notice_text"] == "Cancelled: Create a note."
    assert all("tool_result" not in m or m["tool_result"] is None for m in messages)


def csrf_client(user: Any) -> tuple[Client, str]:
    """A client that enforces CSRF as a browser's requests meet it, and the page's token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get(reverse("agent:chat"))  # the page sets the CSRF cookie
    return client, client.cookies[settings.CSRF_COOKIE_NAME].value


@pytest.mark.parametrize(
    "headers",
    [
        {"X-CSRFToken": "not-the-token"},
        {},
    ],
    ids=["wrong-token", "no-token"],
)
def test_a_refused_csrf_check_answers_the_json_error_the_page_reads(user, headers):
    client, _token = csrf_client(user)
    refused = client.post(reverse("agent:conversation_create"), {}, content_type="application/json", headers=headers)
    assert refused.status_code == 403 and refused["Content-Type"] == "application/json"
    assert refused.json()["error"] == "csrf_failed" and not Conversation.objects.exists()


def test_a_post_from_another_origin_is_refused_as_json_even_with_the_token(user):
    client, token = csrf_client(user)
    refused = client.post(
        reverse("agent:conversation_create"),
        {},
        content_type="application/json",
        headers={"X-CSRFToken": token, "Origin": "https://elsewhere.example"},
    )
    assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"
    assert not Conversation.objects.exists()


@override_settings(CSRF_FAILURE_VIEW="tests.web.test_api.site_failure_page")
def test_the_api_answers_json_whatever_failure_page_the_site_has(user):
    client, _token = csrf_client(user)
    refused = client.post(reverse("agent:turn_stop", args=[uuid.uuid4()]), {}, content_type="application/json")
    assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"


def site_failure_page(request: Any, reason: str = "") -> HttpResponseForbidden:
    return HttpResponseForbidden("<h1>The site's own CSRF page</h1>")


def test_reads_need_no_csrf_token(user):
    client, _token = csrf_client(user)
    assert client.get(reverse("agent:conversation_list")).status_code == 200


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000)
def test_an_oversized_json_body_answers_413_too_large(session, chat, endpoint):
    client, _ref = session
    response = post(client, "turn_start", chat.pk, text="x" * 2_000)
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert not chat.turns.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000)
def test_an_oversized_form_body_answers_413_too_large_before_the_csrf_check_reads_it(user, chat):
    client, token = csrf_client(user)
    response = client.post(
        reverse("agent:conversation_rename", args=[chat.pk]),
        urlencode({"title": "x" * 2_000}),
        content_type="application/x-www-form-urlencoded",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    chat.refresh_from_db()
    assert chat.title != "x" * 2_000


def test_every_refusal_declares_its_own_http_status_and_message():
    refusals = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.Refusal)]
    coded = [c for c in refusals if c is not errors.Refusal and ("code" in vars(c) or c is errors.ScopeRefused)]
    assert len(coded) > 10
    assert [c.__name__ for c in coded if "http_status" not in vars(c)] == []
    assert [c.__name__ for c in coded if "default_message" not in vars(c)] == []
    assert refusal_response(errors.Busy()).status_code == 409
    assert refusal_response(errors.SessionGone()).status_code == 401


def test_a_refusal_says_why_in_the_users_language(user, session):
    client, _ref = session
    UserSettings.objects.update_or_create(user=user, defaults={"language": "et"})
    response = get(client, "conversation_detail", uuid.uuid4())
    with translation.override("et"):
        estonian = gettext("This chat is no longer there.")
    assert estonian != "This chat is no longer there."  # the catalogue has it
    assert (response.status_code, response.json()) == (404, {"error": "not_found", "message": estonian})


def test_invalid_input_answers_every_message_and_each_field():
    invalid = ValidationError({"title": ["Too long."], "__all__": ["Not now."]})
    assert errors.invalid_body(invalid) == {
        "error": "invalid",
        "message": "Too long. Not now.",
        "fields": {"title": ["Too long."], "__all__": ["Not now."]},
    }


@pytest.mark.django_db(transaction=True)
def test_a_user_message_names_the_turn_that_stored_it(ref, session, chat, endpoint, model_server):
    client, _ref = session
    model_server.push(answer("Hi."))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    run_turn(str(turn.pk))
    messages = get(client, "message_list", chat.pk, latest="1").json()["messages"]
    (user_message,) = [m for m in messages if m["role"] == "user"]
    assert user_message["turn"] == str(turn.pk) and user_message["content"] == "hello"


@pytest.mark.django_db(transaction=True)
def test_stop_over_http_before_the_claim_ends_the_turn_without_storing_its_words(ref, session, chat, endpoint):
    client, _ref = session
    turn_id = post(client, "turn_start", chat.pk, text="never mind").json()["turn"]["id"]
    assert post(client, "turn_stop", chat.pk).json() == {"asked": True}
    assert post(client, "turn_stop", chat.pk).json() == {"asked": False}  # already asked
    run_turn(turn_id)  # a worker claims it late
    assert get(client, "conversation_detail", chat.pk).json()["turn"] is None
    messages = get(client, "message_list", chat.pk, latest="1").json()["messages"]
    assert [m for m in messages if m["role"] == "user"] == []
    assert Turn.objects.get(pk=turn_id).status == Turn.Status.STOPPED


def test_stop_with_no_live_turn_asks_nothing(session, chat):
    client, _ref = session
    assert post(client, "turn_stop", chat.pk).json() == {"asked": False}


@pytest.mark.django_db(transaction=True)
def test_edit_regenerate_and_switch_over_http(session, ref, chat, endpoint, model_server):
    # given a question answered
    client, _ref = session
    model_server.push(answer("Cats purr."), answer("Cats nap."), answer("Kittens play."))
    run_turn(str(turns.start(ref, chat.pk, "cats?", impersonated=False).pk))
    asked, said = chat.messages.order_by("seq")

    # when it is answered again, then edited, then switched back
    regenerated = post(client, "turn_regenerate", chat.pk, message=str(said.pk))
    run_turn(regenerated.json()["turn"]["id"])
    busy = post(client, "turn_edit", chat.pk, message=str(asked.pk), text="kittens?")
    run_turn(busy.json()["turn"]["id"])
    switched = post(client, "version_switch", chat.pk, message=str(asked.pk))

    # then each was accepted and the first line is back, with its second answer
    assert [r.status_code for r in (regenerated, busy, switched)] == [200, 200, 200]
    assert switched.json() == {"changed": True}
    shown = get(client, "message_list", chat.pk, latest=1).json()["messages"]
    assert [m["content"] for m in shown] == ["cats?", "Cats nap."]
    assert shown[0]["versions"]["index"] == 1 and shown[1]["versions"]["count"] == 2


@pytest.mark.django_db(transaction=True)
def test_a_regenerate_while_a_turn_runs_is_409_busy(session, ref, chat, endpoint, model_server):
    client, _ref = session
    model_server.push(answer("Cats purr."))
    run_turn(str(turns.start(ref, chat.pk, "cats?", impersonated=False).pk))
    said = chat.messages.order_by("seq").last()
    post(client, "turn_start", chat.pk, text="dogs?")
    refused = [
        post(client, "turn_regenerate", chat.pk, message=str(said.pk)),
        post(client, "version_switch", chat.pk, message=str(said.pk)),
    ]
    assert [(r.status_code, r.json()["error"]) for r in refused] == [(409, "busy"), (409, "busy")]
