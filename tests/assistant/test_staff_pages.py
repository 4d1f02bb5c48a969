"""Staff's view of cost: the chart, endpoint health, the journal's CSV and each user's endpoint."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agent.models import AIRequest, Endpoint, UserSettings
from tests.support.factories import AIRequestFactory, EndpointFactory, TurnFactory, UserSettingsFactory

pytestmark = pytest.mark.django_db
PAGES = ["admin:agent_airequest_cost", "admin:agent_airequest_health", "admin:agent_airequest_export"]


@pytest.fixture
def staff(make_user: Any) -> Client:
    client = Client()
    client.force_login(make_user("agent.manage_agent", is_staff=True))
    return client


def journal(user: Any, endpoint: Endpoint, **fields: Any) -> AIRequest:
    fields.setdefault("status", "success")
    return AIRequestFactory(user=user, endpoint=endpoint, **fields)


@pytest.mark.parametrize("page", PAGES)
def test_the_cost_pages_are_for_staff_who_manage_the_assistant_only(make_user: Any, user: Any, page: str) -> None:
    bare_staff = Client()
    bare_staff.force_login(make_user(is_staff=True))
    assert bare_staff.get(reverse(page)).status_code == 403
    plain = Client()
    plain.force_login(user)
    assert plain.get(reverse(page)).status_code == 302  # to the admin's login
    assert Client().get(reverse(page)).status_code == 302


def test_the_chart_draws_cost_and_turns_per_user_and_day_as_svg(
    staff: Client, user: Any, chat: Any, endpoint: Endpoint
) -> None:
    journal(user, endpoint, cost_usd=Decimal("0.5"))
    journal(user, endpoint, cost_usd=Decimal("0.25"))
    TurnFactory(conversation=chat, deadline_at="2030-01-01T00:00Z")
    response = staff.get(reverse("admin:agent_airequest_cost"))
    body = response.content.decode()
    assert response.status_code == 200 and body.count("<svg") >= 2 and "<script" not in body.split("<svg", 1)[1]
    assert f"{user.username}: $0.7500" in body and f"{user.username}: 1</title>" in body
    assert "0.7500" in body and "cdn" not in body.lower()


def test_endpoint_health_counts_calls_errors_by_code_and_latency(staff: Client, user: Any, endpoint: Endpoint) -> None:
    for latency in (100, 200, 300, 400):
        journal(user, endpoint, latency_ms=latency)
    journal(user, endpoint, status="error", error_code="rate_limited", http_status=429, latency_ms=5)
    journal(user, endpoint, status="refused", error_code="budget_exceeded")
    response = staff.get(reverse("admin:agent_airequest_health"))
    (row,) = response.context["endpoints"]
    assert (row["name"], row["calls"], row["error_rate"]) == ("scripted", 5, 20.0)
    assert row["errors"] == [{"code": "rate_limited (429)", "count": 1, "rate": 20.0}]
    assert (row["p50"], row["p95"]) == (250, 385)


def test_the_csv_export_holds_the_range_and_never_content_or_keys(staff: Client, user: Any, endpoint: Endpoint) -> None:
    journal(
        user,
        endpoint,
        cost_usd=Decimal("0.1"),
        captured={"messages": [{"content": "secret words"}]},
        attribution={"message": "m"},
    )
    today = journal(user, endpoint).created_at.date().isoformat()
    response = staff.get(reverse("admin:agent_airequest_export"), {"start": today, "end": today})
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert response["Content-Type"].startswith("text/csv") and len(rows) == 2
    assert rows[0]["username"] == user.username and rows[0]["endpoint"] == "scripted"
    assert "secret words" not in text and "sk-test-secret" not in text and "captured" not in text
    empty = staff.get(reverse("admin:agent_airequest_export"), {"start": "2000-01-01", "end": "2000-01-02"})
    assert b"".join(empty.streaming_content).decode().count("\n") == 1
    assert staff.get(reverse("admin:agent_airequest_export")).status_code == 200  # the form


def test_the_user_list_marks_each_endpoint_personal_inherited_or_fallback(
    staff: Client, make_user: Any, endpoint: Endpoint
) -> None:
    off = EndpointFactory(name="off", base_url="http://x/v1", model="m", enabled=False)
    mine = EndpointFactory(name="mine", base_url="http://x/v1", model="m")
    UserSettingsFactory(user=make_user(), endpoint=mine, endpoint_set_by="staff")
    UserSettingsFactory(user=make_user(), endpoint=off, endpoint_set_by="staff")
    UserSettingsFactory(user=make_user(), language="et")
    body = staff.get(reverse("admin:agent_usersettings_changelist")).content.decode()
    assert "mine (personal)" in body and "scripted (fallback: disabled)" in body and "scripted (inherited)" in body
    row = UserSettings.objects.get(endpoint=mine)
    detail = staff.get(reverse("admin:agent_usersettings_change", args=[row.pk])).content.decode()
    assert "cost_per_user" in detail and "turns_per_user" in detail


def test_the_user_list_and_page_show_how_many_tools_each_user_may_use(staff: Client, make_user: Any) -> None:
    # given: a user who may read notes (the test site's three note reads) and one who may not
    reader = UserSettingsFactory(user=make_user("notes.view_note"))
    UserSettingsFactory(user=make_user())
    # when / then: a row per user, counted by their rights
    body = staff.get(reverse("admin:agent_usersettings_changelist")).content.decode()
    assert 'class="column-tools_count"' in body
    assert '<td class="field-tools_count">3</td>' in body and '<td class="field-tools_count">0</td>' in body
    detail = staff.get(reverse("admin:agent_usersettings_change", args=[reader.pk])).content.decode()
    assert "field-tools_count" in detail


def test_the_journal_list_and_export_show_the_tools_a_call_carried(
    staff: Client, user: Any, endpoint: Endpoint
) -> None:
    today = journal(user, endpoint, tools_offered=17, tools_bytes=15_321).created_at.date().isoformat()
    body = staff.get(reverse("admin:agent_airequest_changelist")).content.decode()
    assert '<td class="field-tools_offered">17</td>' in body and "15321" in body
    response = staff.get(reverse("admin:agent_airequest_export"), {"start": today, "end": today})
    (row,) = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    assert (row["tools_offered"], row["tools_bytes"]) == ("17", "15321")
