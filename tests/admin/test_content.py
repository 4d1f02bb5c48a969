"""Content is content: a chat's title, a flag's reason and a user's own instructions show only to
``agent.view_chat_content`` holders, on every page that could carry them; instructions are never editable."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from agent.models import Confirmation, Conversation, OffPurposeFlag
from tests.support.factories import ConversationFactory, TurnFactory, UserSettingsFactory

pytestmark = pytest.mark.django_db
TITLE = "Divorce lawyer near me"
REASON = "asked for a love poem about Jane"
INSTRUCTIONS = "Call me Captain Nemo"


@pytest.fixture
def titled(user: Any) -> Conversation:
    chat = ConversationFactory(user=user, title=TITLE)
    TurnFactory(conversation=chat, deadline_at=timezone.now())
    Confirmation.objects.create(
        user=user,
        conversation=chat,
        tool_name="notes_create",
        call_id="c1",
        fingerprint="f",
        expires_at=timezone.now(),
    )
    return chat


def pages_of(chat: Conversation) -> list[str]:
    return [
        reverse("admin:agent_conversation_changelist"),
        reverse("admin:agent_conversation_change", args=[chat.pk]),
        reverse("admin:agent_turn_changelist"),
        reverse("admin:agent_turn_change", args=[chat.turns.get().pk]),
        reverse("admin:agent_confirmation_changelist"),
    ]


def test_a_chats_label_is_its_id() -> None:
    chat = Conversation(title=TITLE)
    assert str(chat) == str(chat.pk)


def test_a_chats_title_is_hidden_without_view_chat_content(staff: Any, titled: Conversation) -> None:
    for url in pages_of(titled):
        page = staff.get(url).content.decode()
        assert TITLE not in page and str(titled.pk) in page, url


def test_a_chats_title_shows_to_content_readers(staff_with: Any, titled: Conversation) -> None:
    reader = staff_with("agent.view_chat_content")
    for url in pages_of(titled)[:2]:
        assert TITLE in reader.get(url).content.decode()


def test_a_chats_history_never_names_its_title(staff: Any, titled: Conversation) -> None:
    # given a save of the chat's page, which writes a history entry labelled with the chat
    inlines = {
        f"{prefix}-{key}": "0" for prefix in ("messages", "attachments") for key in ("TOTAL_FORMS", "INITIAL_FORMS")
    }
    assert staff.post(reverse("admin:agent_conversation_change", args=[titled.pk]), inlines).status_code == 302
    entry = LogEntry.objects.get(object_id=str(titled.pk))
    history = staff.get(reverse("admin:agent_conversation_history", args=[titled.pk])).content.decode()
    assert entry.object_repr == str(titled.pk) and TITLE not in history


def test_a_flags_reason_is_hidden_without_view_chat_content(staff: Any, user: Any) -> None:
    flag = OffPurposeFlag.objects.create(user=user, turn_ref="00000000-0000-0000-0000-000000000007", reason=REASON)
    for url in (
        reverse("admin:agent_offpurposeflag_changelist"),
        reverse("admin:agent_offpurposeflag_change", args=[flag.pk]),
        reverse("admin:agent_offpurposeflag_delete", args=[flag.pk]),
    ):
        assert REASON not in staff.get(url).content.decode(), url
    staff.post(reverse("admin:agent_offpurposeflag_delete", args=[flag.pk]), {"post": "yes"})
    assert REASON not in LogEntry.objects.get().object_repr


def test_a_flags_reason_shows_to_content_readers(staff_with: Any, user: Any) -> None:
    flag = OffPurposeFlag.objects.create(user=user, turn_ref="00000000-0000-0000-0000-000000000007", reason=REASON)
    reader = staff_with("agent.view_chat_content")
    assert REASON in reader.get(reverse("admin:agent_offpurposeflag_changelist")).content.decode()
    assert REASON in reader.get(reverse("admin:agent_offpurposeflag_change", args=[flag.pk])).content.decode()


def test_a_users_instructions_are_hidden_without_view_chat_content(staff: Any, user: Any) -> None:
    row = UserSettingsFactory(user=user, instructions=INSTRUCTIONS)
    page = staff.get(reverse("admin:agent_usersettings_change", args=[row.pk])).content.decode()
    assert INSTRUCTIONS not in page and 'name="instructions"' not in page


def test_a_users_instructions_show_to_content_readers_but_stay_theirs(staff_with: Any, user: Any) -> None:
    row = UserSettingsFactory(user=user, instructions=INSTRUCTIONS)
    reader = staff_with("agent.view_chat_content", "agent.manage_endpoints")
    url = reverse("admin:agent_usersettings_change", args=[row.pk])
    page = reader.get(url).content.decode()
    assert INSTRUCTIONS in page and 'name="instructions"' not in page
    response = reader.post(url, {"user": user.pk, "instructions": "obey me", "language": "", "enabled": "unknown"})
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.instructions == INSTRUCTIONS


def test_the_migration_relabels_history_that_named_titles_and_reasons(user: Any) -> None:
    # given history written when labels carried a chat's title and a flag's reason
    chat = ConversationFactory(user=user, title=TITLE)
    flag = OffPurposeFlag.objects.create(user=user, turn_ref="00000000-0000-0000-0000-000000000007", reason=REASON)
    for row, label in ((chat, TITLE), (flag, REASON)):
        LogEntry.objects.create(
            user=user,
            content_type=ContentType.objects.get_for_model(row),
            object_id=str(row.pk),
            object_repr=label,
            action_flag=2,
        )
    # when the data step runs
    with connection.schema_editor() as editor:
        importlib.import_module("agent.migrations.0006_staff_and_secrets").relabel_history(apps, editor)
    # then
    assert sorted(LogEntry.objects.values_list("object_repr", flat=True)) == sorted([str(chat.pk), str(flag.turn_ref)])


def test_a_files_name_is_hidden_without_view_chat_content(staff: Any, staff_with: Any, titled: Conversation) -> None:
    # given a file the user added to the chat, named in their own words
    from agent.models import Attachment

    Attachment.objects.create(
        user=titled.user, conversation=titled, name="divorce-papers.pdf", content_type="application/pdf", size=10
    )
    url = reverse("admin:agent_conversation_change", args=[titled.pk])
    # then staff without the content permission see that there is a file, not its name
    page = staff.get(url).content.decode()
    assert "divorce-papers.pdf" not in page and "application/pdf" in page
    assert "divorce-papers.pdf" in staff_with("agent.view_chat_content").get(url).content.decode()
