"""No oracle in the list pages: a query-string lookup the page does not offer is refused, so a
guessed prefix of a hidden field gets the same answer whether it matches or not."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from agent.admin.permissions import DeclaredLookupsOnly
from agent.models import Confirmation, OffPurposeFlag, Turn
from tests.support.admin import listing
from tests.support.factories import ConversationFactory, EndpointFactory, TurnFactory

pytestmark = pytest.mark.django_db
LIST = "admin:agent_{}_changelist"


@pytest.fixture
def live_turn(user: Any) -> Turn:
    chat = ConversationFactory(user=user)
    return TurnFactory(
        conversation=chat,
        user=user,
        language="en",
        text="my secret plans",
        session_key="abcdefghijklmnopqrstuvwxyz012345",
        status=Turn.Status.RUNNING,
        deadline_at=timezone.now(),
    )


def same_answer_or_refused(client: Any, model: str, matching: dict[str, Any], other: dict[str, Any]) -> None:
    url = reverse(LIST.format(model))
    hit, miss = listing(client, url, **matching), listing(client, url, **other)
    assert hit == miss and hit[0] in (200, 400), (hit, miss)
    assert hit[0] == 400  # a lookup no filter offers is refused outright


def test_a_turns_session_key_cannot_be_guessed_by_prefix(staff: Any, user: Any, live_turn: Turn) -> None:
    same_answer_or_refused(
        staff,
        "turn",
        {"user__id__exact": user.pk, "session_key__regex": "^abc"},
        {"user__id__exact": user.pk, "session_key__regex": "^zzz"},
    )
    same_answer_or_refused(staff, "turn", {"session_key__startswith": "abc"}, {"session_key__startswith": "zzz"})


def test_a_turns_text_cannot_be_searched_by_lookup(staff: Any, live_turn: Turn) -> None:
    same_answer_or_refused(staff, "turn", {"text__icontains": "secret"}, {"text__icontains": "nothing"})


@pytest.mark.parametrize("field", ["arguments", "preview"])
def test_a_cards_arguments_and_preview_cannot_be_searched_by_lookup(staff: Any, user: Any, field: str) -> None:
    Confirmation.objects.create(
        user=user,
        conversation=ConversationFactory(user=user),
        tool_name="notes_create",
        call_id="c1",
        arguments={"title": "ARGUMENT-4242"},
        preview={"title": "PREVIEW-4242"},
        fingerprint="f",
        expires_at=timezone.now(),
    )
    same_answer_or_refused(staff, "confirmation", {f"{field}__icontains": "4242"}, {f"{field}__icontains": "nothing"})


def test_an_endpoints_stored_key_cannot_be_guessed_by_prefix(staff: Any) -> None:
    EndpointFactory(name="e", base_url="http://localhost:1/v1", model="m", api_key="sk-live-abcdef")
    same_answer_or_refused(staff, "endpoint", {"api_key__startswith": "sk-live"}, {"api_key__startswith": "nothing"})


def test_a_flags_reason_is_not_searched_for_staff_who_may_not_read_chats(staff: Any, user: Any) -> None:
    OffPurposeFlag.objects.create(user=user, turn_ref="00000000-0000-0000-0000-000000000001", reason="poems please")
    url = reverse(LIST.format("offpurposeflag"))
    assert listing(staff, url, q="poems") == listing(staff, url, q="nothing") == (200, 0)


def test_a_flags_reason_is_searched_for_content_readers(staff_with: Any, user: Any) -> None:
    OffPurposeFlag.objects.create(user=user, turn_ref="00000000-0000-0000-0000-000000000001", reason="poems please")
    reader = staff_with("agent.view_chat_content")
    assert listing(reader, reverse(LIST.format("offpurposeflag")), q="poems") == (200, 1)


def test_the_pages_own_filters_and_date_links_still_work(staff: Any, live_turn: Turn) -> None:
    assert listing(staff, reverse(LIST.format("turn")), status__exact="running") == (200, 1)
    assert listing(staff, reverse(LIST.format("turn")), end_reason="") == (200, 1)
    assert listing(staff, reverse(LIST.format("endpoint")), enabled__exact="1") == (200, 0)
    year = timezone.now().year
    assert listing(staff, reverse(LIST.format("airequest")), created_at__year=year, task="agent.chat") == (200, 0)


def test_every_assistant_admin_page_keeps_to_its_declared_lookups() -> None:
    pages = [page for model, page in admin.site._registry.items() if model._meta.app_label == "agent"]
    assert len(pages) == 11 and all(isinstance(page, DeclaredLookupsOnly) for page in pages)
