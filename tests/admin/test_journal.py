"""The journal's CSV is safe to open in a spreadsheet and read without a server-side cursor; the health
page counts only the endpoint's own failures; staff archiving never brings back a deleted chat."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agent.admin import reports
from agent.models import AIRequest, Conversation, Endpoint, Message
from tests.support.factories import AIRequestFactory, ConversationFactory

pytestmark = pytest.mark.django_db


def journal(user: Any, endpoint: Endpoint | None = None, **fields: Any) -> AIRequest:
    fields.setdefault("status", "success")
    return AIRequestFactory(user=user, endpoint=endpoint, **fields)


def export(staff: Any) -> list[dict[str, str]]:
    today = timezone.localdate().isoformat()
    response = staff.get(reverse("admin:agent_airequest_export"), {"start": today, "end": today})
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.parametrize("model", ['=HYPERLINK("http://x.example","y")', "+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_a_model_name_that_a_spreadsheet_would_run_is_quoted(staff: Any, user: Any, model: str) -> None:
    journal(user, model=model)
    (row,) = export(staff)
    assert row["model"] == "'" + model


def test_a_plain_model_name_is_written_as_it_is(staff: Any, user: Any) -> None:
    journal(user, model="gpt-4o-mini")
    assert export(staff)[0]["model"] == "gpt-4o-mini"


def test_costs_are_written_as_plain_decimals(staff: Any, user: Any) -> None:
    journal(user, cost_usd=Decimal(0))
    journal(user, cost_usd=Decimal("0.00000123"))
    assert sorted(row["cost_usd"] for row in export(staff)) == ["0.00000000", "0.00000123"]


def test_the_export_reads_the_journal_a_page_at_a_time_after_the_last_row(
    staff: Any, user: Any, monkeypatch: Any
) -> None:
    # given five rows, three made at the very same time
    rows = [journal(user, model=f"m{n}") for n in range(5)]
    same = timezone.now() - timedelta(minutes=1)
    AIRequest.objects.filter(pk__in=[r.pk for r in rows[:3]]).update(created_at=same)
    monkeypatch.setattr(reports, "JOURNAL_PAGE", 2)
    # when exported
    with CaptureQueriesContext(connection) as queries:
        exported = export(staff)
    # then every row once, oldest first, in three bounded reads and no server-side cursor
    expected = sorted(AIRequest.objects.values_list("created_at", "id"))
    assert [row["id"] for row in exported] == [str(pk) for _at, pk in expected]
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "agent_airequest"' in q["sql"]]
    assert len(reads) == 3 and all("LIMIT 2" in sql for sql in reads)


def test_the_health_page_leaves_out_calls_ended_by_a_stop_or_the_deadline(
    staff: Any, user: Any, endpoint: Endpoint
) -> None:
    journal(user, endpoint, latency_ms=100)
    journal(user, endpoint, status="error", error_code="interrupted", latency_ms=50)  # the user's Stop
    journal(user, endpoint, status="error", error_code="deadline", latency_ms=50)
    journal(user, endpoint, status="error", error_code="rate_limited", http_status=429)
    (row,) = staff.get(reverse("admin:agent_airequest_health")).context["endpoints"]
    assert (row["calls"], row["error_rate"]) == (2, 50.0)
    assert [error["code"] for error in row["errors"]] == ["rate_limited (429)"]


def test_staff_archiving_a_chat_its_user_deleted_leaves_it_deleted(staff: Any, user: Any) -> None:
    # given a chat its user deleted a while ago (its purge counts from then)
    chat = ConversationFactory(user=user)
    Message.objects.filter(conversation=chat).delete()
    deleted_at = timezone.now() - timedelta(days=3)
    Conversation.objects.filter(pk=chat.pk).update(status="deleted", updated_at=deleted_at)
    # when staff archive it
    staff.post(reverse("admin:agent_conversation_changelist"), {"action": "archive", "_selected_action": [chat.pk]})
    # then
    chat.refresh_from_db()
    assert (chat.status, chat.updated_at) == ("deleted", deleted_at)
