"""Staff pages: for agent.manage_agent holders, and never a secret or a tool's data."""

import pytest
from django.test import Client
from django.urls import reverse

from agent.conversations import append_message
from agent.models import AIRequest, Conversation, Message, Turn
from tests.support.factories import AIRequestFactory, ConversationFactory, EndpointFactory, TurnFactory, UserFactory
from tests.support.sessions import grant

MODELS = [
    "endpoint",
    "agentsettings",
    "usersettings",
    "conversation",
    "turn",
    "confirmation",
    "airequest",
    "offpurposeflag",
]


@pytest.fixture
def staff(db):
    user = grant(UserFactory(is_staff=True), "agent.manage_agent")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def chat(db):
    chat = ConversationFactory()
    append_message(chat.pk, role=Message.Role.USER, content="my secret plans")
    append_message(
        chat.pk,
        role=Message.Role.TOOL,
        tool_name="notes_read",
        tool_outcome="ok",
        tool_result={"body": "customer data 4242"},
        tool_calls=None,
    )
    return chat


@pytest.mark.parametrize("model", MODELS)
def test_staff_with_manage_agent_see_every_page(staff, model):
    assert staff.get(reverse(f"admin:agent_{model}_changelist"), follow=True).status_code == 200


@pytest.mark.parametrize("model", MODELS)
def test_staff_without_manage_agent_are_refused(db, model):
    client = Client()
    client.force_login(UserFactory(is_staff=True))
    assert client.get(reverse(f"admin:agent_{model}_changelist")).status_code == 403


def test_chat_page_hides_message_text_without_view_chat_content(staff, chat):
    page = staff.get(reverse("admin:agent_conversation_change", args=[chat.pk])).content.decode()
    assert "my secret plans" not in page and "customer data 4242" not in page


def test_chat_page_shows_text_but_never_tool_results_with_view_chat_content(db, chat):
    user = grant(UserFactory(is_staff=True), "agent.manage_agent", "agent.view_chat_content")
    client = Client()
    client.force_login(user)
    page = client.get(reverse("admin:agent_conversation_change", args=[chat.pk])).content.decode()
    assert "my secret plans" in page and "customer data 4242" not in page


def test_api_key_is_masked_in_the_list_and_never_rendered_in_the_form(staff):
    endpoint = EndpointFactory(name="e", base_url="http://localhost:8080/v1", model="m", api_key="sk-live-abcdefgh1234")
    listing = staff.get(reverse("admin:agent_endpoint_changelist")).content.decode()
    form = staff.get(reverse("admin:agent_endpoint_change", args=[endpoint.pk])).content.decode()
    assert "sk-live-abcdefgh1234" not in listing and "••••1234" in listing
    assert "sk-live-abcdefgh1234" not in form


def test_saving_the_endpoint_form_without_a_key_keeps_the_key(db):
    staff = Client()
    staff.force_login(grant(UserFactory(is_staff=True), "agent.manage_agent", "agent.manage_endpoints"))
    endpoint = EndpointFactory(name="e", base_url="http://localhost:8080/v1", model="m", api_key="sk-keep-me")
    data = {
        "name": "e",
        "base_url": "http://localhost:8080/v1",
        "api_key": "",
        "api_key_env": "",
        "model": "m2",
        "input_price_per_mtok": "0",
        "output_price_per_mtok": "0",
        "audio_price_per_minute": "0",
        "timeout_s": "60",
        "enabled": "on",
        "supports_tools": "on",
    }
    response = staff.post(reverse("admin:agent_endpoint_change", args=[endpoint.pk]), data)
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.model == "m2" and endpoint.api_key == "sk-keep-me"


def test_turn_page_never_shows_the_session_key(staff, chat):
    turn = TurnFactory(
        conversation=chat,
        user=chat.user,
        language="en",
        text="hi",
        session_key="sessionkey-should-not-show",
        deadline_at=chat.created_at,
    )
    page = staff.get(reverse("admin:agent_turn_change", args=[turn.pk])).content.decode()
    assert "sessionkey-should-not-show" not in page


def test_stop_action_marks_live_turns(staff, chat):
    turn = TurnFactory(
        conversation=chat,
        user=chat.user,
        language="en",
        text="hi",
        deadline_at=chat.created_at,
        status=Turn.Status.RUNNING,
    )
    staff.post(reverse("admin:agent_turn_changelist"), {"action": "stop", "_selected_action": [str(turn.pk)]})
    turn.refresh_from_db()
    assert turn.stop_requested_at is not None


@pytest.mark.parametrize("action, status", [("archive", "archived"), ("delete_softly", "deleted")])
def test_chat_actions_change_the_status(staff, chat, action, status):
    staff.post(reverse("admin:agent_conversation_changelist"), {"action": action, "_selected_action": [str(chat.pk)]})
    chat.refresh_from_db()
    assert chat.status == status


def test_restore_brings_a_deleted_chat_back(staff, chat):
    Conversation.objects.filter(pk=chat.pk).update(status="deleted")
    staff.post(
        reverse("admin:agent_conversation_changelist"), {"action": "restore", "_selected_action": [str(chat.pk)]}
    )
    chat.refresh_from_db()
    assert chat.status == "active"


def test_journal_shows_cost_totals_by_user_and_day(staff, chat):
    AIRequestFactory(user=chat.user, cost_usd="0.25")
    AIRequestFactory(user=chat.user, cost_usd="0.50")
    response = staff.get(reverse("admin:agent_airequest_changelist"))
    totals = list(response.context["cost_totals"])
    assert totals[0]["calls"] == 2 and str(totals[0]["cost"]).startswith("0.75")
    assert "Cost by user and day" in response.content.decode()


def test_the_endpoint_test_call_reports_its_answer_time_and_journals_it(staff, endpoint, model_server):
    model_server.push({"content": "ok"})
    response = staff.post(
        reverse("admin:agent_endpoint_changelist"),
        {"action": "test_call", "_selected_action": [str(endpoint.pk)]},
        follow=True,
    )
    assert "answered in" in response.content.decode()
    assert model_server.requests[0]["messages"] == [{"role": "user", "content": "Reply with: ok"}]
    assert AIRequest.objects.get().task == "agent.endpoint_test"


def test_the_endpoint_test_call_names_the_failure_without_provider_text(staff, endpoint, model_server):
    model_server.push({"status": 401, "delay": 0, "message": "provider secret text"})
    response = staff.post(
        reverse("admin:agent_endpoint_changelist"),
        {"action": "test_call", "_selected_action": [str(endpoint.pk)]},
        follow=True,
    )
    page = response.content.decode()
    assert "failed (invalid_api_key)" in page and "provider secret text" not in page


def test_the_endpoint_test_call_names_a_server_that_refuses_to_stream_but_answers_whole(staff, endpoint, model_server):
    model_server.push({"status": 400, "delay": 0, "message": "Unknown parameter: 'stream_options'"}, {"content": "ok"})
    response = staff.post(
        reverse("admin:agent_endpoint_changelist"),
        {"action": "test_call", "_selected_action": [str(endpoint.pk)]},
        follow=True,
    )
    page = response.content.decode()
    assert "refused to stream (400), but answers whole" in page and "stream_options" not in page
    streamed, whole = model_server.requests
    assert streamed["stream"] is True and "stream" not in whole


def test_a_cards_page_never_shows_its_arguments_or_preview(staff, chat):
    from agent.models import Confirmation

    confirmation = Confirmation.objects.create(
        user=chat.user,
        conversation=chat,
        tool_name="notes_create",
        call_id="c1",
        arguments={"title": "ARGUMENT-4242"},
        preview={"title": "PREVIEW-4242"},
        fingerprint="FP-4242",
        expires_at="2099-01-01T00:00:00Z",
    )
    for url in (
        reverse("admin:agent_confirmation_changelist"),
        reverse("admin:agent_confirmation_change", args=[confirmation.pk]),
    ):
        page = staff.get(url).content.decode()
        assert "ARGUMENT-4242" not in page and "PREVIEW-4242" not in page and "FP-4242" not in page


def test_a_journal_row_never_shows_its_captured_content(staff, chat):
    row = AIRequestFactory(
        user=chat.user,
        source="agent",
        task="agent.chat",
        status="success",
        captured={"messages": [{"role": "user", "content": "CAPTURED-4242"}]},
    )
    for url in (reverse("admin:agent_airequest_changelist"), reverse("admin:agent_airequest_change", args=[row.pk])):
        assert "CAPTURED-4242" not in staff.get(url).content.decode()
