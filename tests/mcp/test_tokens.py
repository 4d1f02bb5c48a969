"""Personal access tokens: made with their secret shown once and only its digest kept, an actor checked
in one statement, revoked by their user or by staff (who never see them), listed in the admin with their use."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agent.access import McpRef, authorize_session
from agent.core import errors
from agent.mcp import issue_token, revoke_token, tokens
from agent.models import McpCall, McpToken
from tests.support.sessions import csrf_client, grant

pytestmark = pytest.mark.django_db


@pytest.fixture
def mcp_user(make_user: Any) -> Any:
    return make_user("agent.use_mcp", "notes.view_note")


def check(secret: str) -> Any:
    return authorize_session(McpRef(tokens.digest(secret)), impersonated=False)


def test_a_token_keeps_only_its_digest_and_checks_in_one_statement(mcp_user: Any) -> None:
    secret = issue_token(mcp_user, "Claude Desktop")
    row = McpToken.objects.get()
    assert secret.startswith("agm_") and len(secret) > 40
    assert secret not in str(McpToken.objects.values().get()) and row.digest == tokens.digest(secret)
    assert row.expires_at - timezone.now() > timedelta(days=89)
    check(secret)  # statements are compiled once per thread

    with CaptureQueriesContext(connection) as queries:
        scope = check(secret)

    assert len(queries) == 1
    assert (scope.user_id, scope.actor.token_id, scope.actor.token_name) == (mcp_user.pk, row.pk, "Claude Desktop")
    assert scope.has_perm("notes.view_note") and "agm_" not in repr(scope.actor)


@pytest.mark.parametrize(
    "withdraw, refusal",
    [
        (lambda user: revoke_token(user, "App"), errors.SessionGone),
        (lambda user: McpToken.objects.update(expires_at=timezone.now()), errors.SessionGone),
        (lambda user: type(user).objects.filter(pk=user.pk).update(is_active=False), errors.Inactive),
        (lambda user: user.user_permissions.remove(user.user_permissions.get(codename="use_mcp")), errors.Forbidden),
        (lambda user: user.user_permissions.remove(user.user_permissions.get(codename="use_agent")), errors.Forbidden),
    ],
    ids=["revoked", "expired", "inactive", "no use_mcp", "no use_agent"],
)
def test_every_right_withdrawn_refuses_the_next_check(mcp_user: Any, withdraw: Any, refusal: Any) -> None:
    secret = issue_token(mcp_user, "App")
    check(secret)
    withdraw(mcp_user)
    with pytest.raises(refusal):
        check(secret)


def test_names_are_per_user_and_free_again_once_revoked(mcp_user: Any, make_user: Any) -> None:
    issue_token(mcp_user, "Cursor")
    with pytest.raises(ValidationError):
        issue_token(mcp_user, "Cursor")
    with pytest.raises(ValidationError):
        issue_token(mcp_user, "   ")
    issue_token(make_user(), "Cursor")
    assert revoke_token(mcp_user, "Cursor") and not revoke_token(mcp_user, "Cursor")
    issue_token(mcp_user, "Cursor", days=7)


def test_my_assistant_makes_lists_and_revokes_tokens_showing_the_secret_once(mcp_user: Any) -> None:
    client, csrf = csrf_client(mcp_user)
    made = client.post(
        reverse("agent:mcp_tokens"), {"name": "VS Code"}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf
    )
    assert made.status_code == 200
    secret = made.json()["secret"]
    check(secret)
    listed = client.get(reverse("agent:assistant_api")).json()["mcp"]
    assert listed["offered"] and listed["url"].endswith(reverse("agent:mcp"))
    (token,) = listed["tokens"]
    assert token["name"] == "VS Code" and secret not in str(listed) and token["last_used_at"] is None

    revoked = client.post(
        reverse("agent:mcp_revoke"), {"token": token["id"]}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf
    )
    assert revoked.status_code == 200 and revoked.json()["mcp"]["tokens"] == []
    with pytest.raises(errors.SessionGone):
        check(secret)


def test_a_user_without_use_mcp_is_offered_no_tokens(make_user: Any) -> None:
    user = make_user()
    client, csrf = csrf_client(user)
    assert client.get(reverse("agent:assistant_api")).json()["mcp"]["offered"] is False
    refused = client.post(
        reverse("agent:mcp_tokens"), {"name": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf
    )
    assert refused.status_code == 403 and refused.json()["error"] == "mcp_not_offered"
    assert not McpToken.objects.exists()


def test_another_users_token_cannot_be_revoked_from_the_page(mcp_user: Any, make_user: Any) -> None:
    issue_token(mcp_user, "Mine")
    other, csrf = csrf_client(grant(make_user(), "agent.use_mcp"))
    pk = McpToken.objects.get().pk
    other.post(reverse("agent:mcp_revoke"), {"token": pk}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    assert McpToken.objects.get().revoked_at is None


def test_staff_see_tokens_and_their_calls_never_a_secret_and_revoke_them(mcp_user: Any, make_user: Any) -> None:
    secret = issue_token(mcp_user, "Claude Desktop")
    row = McpToken.objects.get()
    McpCall.objects.create(token=row, token_name=row.name, user=mcp_user, method="tools/call", tool_name="notes_search")
    staff = Client()
    staff.force_login(make_user("agent.manage_agent", is_staff=True))

    page = staff.get(reverse("admin:agent_mcptoken_changelist")).content.decode()
    detail = staff.get(reverse("admin:agent_mcptoken_change", args=[row.pk])).content.decode()
    calls = staff.get(reverse("admin:agent_mcpcall_changelist")).content.decode()

    assert "Claude Desktop" in page and "notes_search" in calls
    for shown in (page, detail, calls):
        assert secret not in shown and row.digest not in shown
    assert staff.get(reverse("admin:agent_mcptoken_add")).status_code == 403
    done = staff.post(
        reverse("admin:agent_mcptoken_changelist"), {"action": "revoke", "_selected_action": [row.pk]}, follow=True
    )
    assert "1 token revoked." in done.content.decode()
    with pytest.raises(errors.SessionGone):
        check(secret)


def test_the_tokens_are_for_managers_only(make_user: Any) -> None:
    client = Client()
    client.force_login(make_user(is_staff=True))
    assert client.get(reverse("admin:agent_mcptoken_changelist")).status_code == 403


@pytest.mark.parametrize(
    "value, problem",
    [
        ({}, None),
        (None, None),
        ({"OAUTH": True}, None),
        ({"OAUTH": "yes"}, "must be True or False"),
        ({"TOKENS": 1}, "unknown keys: TOKENS"),
        ("on", "must be None or a dict"),
    ],
)
def test_the_mcp_setting_is_checked_at_start(settings: Any, value: Any, problem: str | None) -> None:
    settings.AGENT = {**settings.AGENT, "MCP": value}
    found = [m.msg for m in run_checks(tags=["agent"]) if m.id == "agent.E021"]
    assert (found == []) if problem is None else any(problem in m for m in found), found


def test_mcp_without_its_sdk_is_named_at_start(settings: Any, monkeypatch: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MCP": {}}
    assert not [m for m in run_checks(tags=["agent"]) if m.id == "agent.E022"]
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the SDK were not installed
    assert [m.hint for m in run_checks(tags=["agent"]) if m.id == "agent.E022"] == ['pip install "django-agent[mcp]"']


def test_a_browser_session_even_an_operators_never_reaches_mcp(mcp_user: Any) -> None:
    """Only a bearer token is read: a signed-in cookie (here an impersonating operator's) is not a way in."""
    client = Client()
    client.force_login(mcp_user)
    session = client.session
    session["hijack_history"] = ["1"]
    session.save()
    answer = client.post(reverse("agent:mcp"), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "application/json")
    assert answer.status_code == 401 and "resource_metadata=" in answer["WWW-Authenticate"]
