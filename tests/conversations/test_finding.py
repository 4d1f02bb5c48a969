"""Finding chats: the archive listed apart and restored by its owner, and search over one's own chats."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent import conversations
from agent.access import SessionRef
from agent.core.errors import Impersonated, NotFound
from agent.models import Conversation, Message
from tests.support.factories import ConversationFactory

pytestmark = pytest.mark.django_db


def chat_of(user: Any, title: str = "", status: str = "active", *said: str, age: int = 0) -> Conversation:
    row = ConversationFactory(user=user, title=title, status=status)
    for text in said:
        conversations.append_message(row.pk, role=Message.Role.USER, content=text)
    Conversation.objects.filter(pk=row.pk).update(last_message_at=timezone.now() - timedelta(minutes=age))
    return Conversation.objects.get(pk=row.pk)


def ids(page: conversations.Page) -> list[Any]:
    return [c.pk for c in page.conversations]


def test_archived_chats_are_listed_apart_newest_first_in_keyset_pages(ref: SessionRef, user: Any) -> None:
    active = chat_of(user, "active")
    archived = [chat_of(user, f"old {n}", "archived", age=n) for n in range(3)]
    chat_of(user, "gone", "deleted")

    first = conversations.list_conversations(ref, impersonated=False, archived=True, limit=2)
    second = conversations.list_conversations(ref, impersonated=False, archived=True, limit=2, cursor=first.next_cursor)

    assert ids(first) + ids(second) == [c.pk for c in archived] and second.next_cursor is None
    assert ids(conversations.list_conversations(ref, impersonated=False)) == [active.pk]


def test_restore_brings_an_archived_chat_back_to_the_list(ref: SessionRef, user: Any) -> None:
    chat = chat_of(user, "kept", "archived")

    restored = conversations.restore_conversation(ref, chat.pk, impersonated=False)

    assert restored.status == "active"
    assert ids(conversations.list_conversations(ref, impersonated=False)) == [chat.pk]


def test_restore_is_one_conditional_update(ref: SessionRef, user: Any) -> None:
    chat = chat_of(user, "kept", "archived")

    with CaptureQueriesContext(connection) as queries:
        conversations.restore_conversation(ref, chat.pk, impersonated=False)

    assert sum(q["sql"].lstrip().upper().startswith("UPDATE") for q in queries.captured_queries) == 1


def test_restore_never_brings_back_a_deleted_or_someone_elses_chat(
    ref: SessionRef, user: Any, others_chat: Conversation
) -> None:
    deleted = chat_of(user, "gone", "deleted")
    Conversation.objects.filter(pk=others_chat.pk).update(status="archived")

    for chat in (deleted, others_chat):
        with pytest.raises(NotFound):
            conversations.restore_conversation(ref, chat.pk, impersonated=False)

    assert Conversation.objects.get(pk=deleted.pk).status == "deleted"
    assert Conversation.objects.get(pk=others_chat.pk).status == "archived"


def test_restore_while_impersonating_changes_nothing(ref: SessionRef, user: Any) -> None:
    chat = chat_of(user, "kept", "archived")

    with pytest.raises(Impersonated):
        conversations.restore_conversation(ref, chat.pk, impersonated=True)

    assert Conversation.objects.get(pk=chat.pk).status == "archived"


def test_search_finds_the_users_chats_by_title_and_by_words_said(
    ref: SessionRef, user: Any, others_chat: Conversation
) -> None:
    by_title = chat_of(user, "Garden plans", age=1)
    by_text = chat_of(user, "", "archived", "when do tomatoes need the garden?", age=2)
    chat_of(user, "Groceries", "active", "milk and bread")
    chat_of(user, "Garden deleted", "deleted")
    Conversation.objects.filter(pk=others_chat.pk).update(title="garden of someone else")

    found = conversations.search_conversations(ref, "garden", impersonated=False)

    assert ids(found) == [by_title.pk, by_text.pk]


def test_search_reads_any_language_and_pages_by_keyset(ref: SessionRef, user: Any) -> None:
    chats = [chat_of(user, f"Заметки {n}", age=n) for n in range(3)]

    first = conversations.search_conversations(ref, "заметки", impersonated=False, limit=2)
    second = conversations.search_conversations(ref, "заметки", impersonated=False, limit=2, cursor=first.next_cursor)

    assert ids(first) + ids(second) == [c.pk for c in chats] and second.next_cursor is None


@pytest.mark.parametrize("query", ["", "   ", None, "x" * 201])
def test_a_blank_or_overlong_search_is_a_validation_error(ref: SessionRef, query: Any) -> None:
    with pytest.raises(ValidationError) as invalid:
        conversations.search_conversations(ref, query, impersonated=False)

    assert "q" in invalid.value.message_dict


def test_search_syntax_in_the_query_is_never_an_error(ref: SessionRef, user: Any) -> None:
    chat = chat_of(user, "quotes", "active", "a quoted phrase")

    for query in ['"quoted phrase"', "quoted & | ! ( ) :* <->", "'quoted"]:
        assert ids(conversations.search_conversations(ref, query, impersonated=False)) in ([chat.pk], [])
    assert ids(conversations.search_conversations(ref, '"quoted phrase"', impersonated=False)) == [chat.pk]
