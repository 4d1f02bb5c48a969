"""Create, rename, archive and delete a chat."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from agent import conversations
from agent.access import SessionRef
from agent.core.errors import NotFound
from agent.models import Conversation, Message
from tests.support.factories import UserFactory
from tests.support.layer import Listener

pytestmark = pytest.mark.django_db


def test_create_conversation_makes_an_empty_active_chat_of_the_session_user(ref: SessionRef, user: Any) -> None:
    before = timezone.now()
    chat = Conversation.objects.get(pk=conversations.create_conversation(ref, {}, impersonated=False).pk)
    assert (chat.user_id, chat.status, chat.message_count, chat.title) == (user.pk, "active", 0, "")
    assert before <= chat.last_message_at <= timezone.now()


def test_create_conversation_reads_only_the_title(ref: SessionRef, user: Any) -> None:
    someone = UserFactory()
    attrs = {"title": "Plans", "user": someone, "user_id": someone.pk, "status": "deleted", "message_count": 9}
    chat = Conversation.objects.get(pk=conversations.create_conversation(ref, attrs, impersonated=False).pk)
    assert (chat.title, chat.user_id, chat.status, chat.message_count) == ("Plans", user.pk, "active", 0)


def test_create_conversation_rejects_a_title_over_two_hundred_chars(ref: SessionRef) -> None:
    with pytest.raises(ValidationError) as invalid:
        conversations.create_conversation(ref, {"title": "t" * 201}, impersonated=False)
    assert "title" in invalid.value.message_dict
    assert not Conversation.objects.exists()


def test_rename_sets_the_title(ref: SessionRef, chat: Conversation) -> None:
    conversations.rename_conversation(ref, chat.pk, "New name", impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).title == "New name"


def test_rename_accepts_exactly_two_hundred_chars(ref: SessionRef, chat: Conversation) -> None:
    conversations.rename_conversation(ref, chat.pk, "t" * 200, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).title == "t" * 200


@pytest.mark.parametrize("title", ["", "   ", "\n", None, 5, "t" * 201], ids=repr)
def test_rename_to_blank_or_too_long_is_a_validation_error(ref: SessionRef, chat: Conversation, title: Any) -> None:
    conversations.rename_conversation(ref, chat.pk, "Before", impersonated=False)
    with pytest.raises(ValidationError) as invalid:
        conversations.rename_conversation(ref, chat.pk, title, impersonated=False)
    assert "title" in invalid.value.message_dict
    assert Conversation.objects.get(pk=chat.pk).title == "Before"


def test_an_archived_chat_leaves_the_list(ref: SessionRef, chat: Conversation) -> None:
    conversations.archive_conversation(ref, chat.pk, impersonated=False)
    assert conversations.list_conversations(ref, impersonated=False).conversations == []
    assert Conversation.objects.get(pk=chat.pk).status == "archived"


def test_an_archived_chat_can_still_be_opened(ref: SessionRef, chat: Conversation) -> None:
    message = conversations.add_message(ref, chat.pk, {"content": "kept"}, impersonated=False)
    conversations.archive_conversation(ref, chat.pk, impersonated=False)
    assert [m["content"] for m in conversations.get_conversation(ref, chat.pk, impersonated=False)["messages"]] == [
        "kept"
    ]
    assert conversations.get_message(ref, chat.pk, message.pk, impersonated=False)["content"] == "kept"
    assert len(conversations.list_messages(ref, chat.pk, impersonated=False)) == 1


def test_an_archived_chat_can_still_be_written_to(ref: SessionRef, chat: Conversation) -> None:
    conversations.archive_conversation(ref, chat.pk, impersonated=False)
    conversations.add_message(ref, chat.pk, {"content": "still here"}, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).message_count == 1


def test_an_archived_chat_that_gets_a_message_comes_back_to_the_list(ref: SessionRef, chat: Conversation) -> None:
    conversations.archive_conversation(ref, chat.pk, impersonated=False)
    conversations.add_message(ref, chat.pk, {"content": "back again"}, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).status == "active"
    assert [c.pk for c in conversations.list_conversations(ref, impersonated=False).conversations] == [chat.pk]


def test_a_message_stored_by_a_turn_brings_an_archived_chat_back(ref: SessionRef, chat: Conversation) -> None:
    conversations.archive_conversation(ref, chat.pk, impersonated=False)
    conversations.append_message(chat.pk, role=Message.Role.ASSISTANT, content="an answer")
    assert Conversation.objects.get(pk=chat.pk).status == "active"


def test_an_archived_chat_can_be_renamed_and_deleted(ref: SessionRef, chat: Conversation) -> None:
    conversations.archive_conversation(ref, chat.pk, impersonated=False)
    conversations.rename_conversation(ref, chat.pk, "Old stuff", impersonated=False)
    conversations.delete_conversation(ref, chat.pk, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).status == "deleted"


DOORS_ON_A_CHAT: dict[str, Callable[[SessionRef, Conversation, Message, str], Any]] = {
    "get_conversation": lambda r, c, m, ch: conversations.get_conversation(r, c.pk, impersonated=False),
    "get_message": lambda r, c, m, ch: conversations.get_message(r, c.pk, m.pk, impersonated=False),
    "list_messages": lambda r, c, m, ch: conversations.list_messages(r, c.pk, impersonated=False),
    "add_message": lambda r, c, m, ch: conversations.add_message(r, c.pk, {"content": "x"}, impersonated=False),
    "rename_conversation": lambda r, c, m, ch: conversations.rename_conversation(r, c.pk, "x", impersonated=False),
    "archive_conversation": lambda r, c, m, ch: conversations.archive_conversation(r, c.pk, impersonated=False),
    "delete_conversation": lambda r, c, m, ch: conversations.delete_conversation(r, c.pk, impersonated=False),
    "subscribe": lambda r, c, m, ch: conversations.subscribe(r, c.pk, ch, impersonated=False),
}


@pytest.mark.parametrize("door", DOORS_ON_A_CHAT)
def test_a_deleted_chat_is_missing_for_every_door(ref: SessionRef, chat: Conversation, door: str) -> None:
    message = conversations.add_message(ref, chat.pk, {"content": "hi"}, impersonated=False)
    conversations.delete_conversation(ref, chat.pk, impersonated=False)
    with pytest.raises(NotFound):
        DOORS_ON_A_CHAT[door](ref, chat, message, Listener().name)


def test_a_deleted_chat_is_not_listed(ref: SessionRef, chat: Conversation) -> None:
    conversations.delete_conversation(ref, chat.pk, impersonated=False)
    assert conversations.list_conversations(ref, impersonated=False).conversations == []


def test_delete_is_soft_the_rows_stay(ref: SessionRef, chat: Conversation) -> None:
    conversations.add_message(ref, chat.pk, {"content": "hi"}, impersonated=False)
    conversations.delete_conversation(ref, chat.pk, impersonated=False)
    assert Conversation.objects.filter(pk=chat.pk, status="deleted").exists()
    assert Message.objects.filter(conversation=chat).count() == 1


def test_rename_archive_and_delete_each_tell_open_tabs_after_commit(
    ref: SessionRef, chat: Conversation, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    listener = Listener()
    listener.join(conversations.topic(chat.pk))
    for change in (
        lambda: conversations.rename_conversation(ref, chat.pk, "x", impersonated=False),
        lambda: conversations.archive_conversation(ref, chat.pk, impersonated=False),
        lambda: conversations.delete_conversation(ref, chat.pk, impersonated=False),
    ):
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            change()
        assert listener.is_quiet()
        for callback in callbacks:
            callback()
        assert listener.receive() == {"type": "agent.conversation_changed", "conversation": str(chat.pk)}


def test_a_site_s_own_title_limit_is_the_only_one(ref: SessionRef, chat: Conversation, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_TITLE_CHARS": 500}
    conversations.rename_conversation(ref, chat.pk, "t" * 500, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).title == "t" * 500
    with pytest.raises(ValidationError):
        conversations.rename_conversation(ref, chat.pk, "t" * 501, impersonated=False)
