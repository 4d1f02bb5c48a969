"""Races on PostgreSQL, for real: threads with their own connections."""

from __future__ import annotations

import pytest

from agent import conversations
from agent.access import SessionRef
from agent.core.errors import NotFound
from agent.models import Conversation, Message
from tests.support.races import at_once

pytestmark = pytest.mark.django_db(transaction=True)


def test_archive_and_delete_at_once_never_leave_the_chat_alive(ref: SessionRef) -> None:
    for _ in range(20):
        chat = conversations.create_conversation(ref, {}, impersonated=False)
        archived, deleted = at_once(
            lambda pk=chat.pk: conversations.archive_conversation(ref, pk, impersonated=False),
            lambda pk=chat.pk: conversations.delete_conversation(ref, pk, impersonated=False),
        )
        assert deleted[0] == "ok", deleted
        assert archived[0] == "ok" or isinstance(archived[1], NotFound), archived
        assert Conversation.objects.get(pk=chat.pk).status == Conversation.Status.DELETED


def test_messages_added_at_once_get_distinct_seqs_and_are_all_counted(ref: SessionRef) -> None:
    chat = conversations.create_conversation(ref, {}, impersonated=False)

    def write(prefix: str) -> None:
        for i in range(5):
            conversations.add_message(ref, chat.pk, {"content": f"{prefix}{i}"}, impersonated=False)

    assert [o[0] for o in at_once(lambda: write("a"), lambda: write("b"))] == ["ok", "ok"]
    assert sorted(Message.objects.filter(conversation=chat).values_list("seq", flat=True)) == list(range(1, 11))
    assert Conversation.objects.get(pk=chat.pk).message_count == 10
