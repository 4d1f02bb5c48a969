"""Keyset pages of chats and messages."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent.access import SessionRef
from agent.conversations import (
    archive_conversation,
    create_conversation,
    delete_conversation,
    list_conversations,
    list_messages,
)
from agent.core.errors import InvalidCursor
from agent.models import Conversation, Message

pytestmark = pytest.mark.django_db

T0 = timezone.now().replace(microsecond=0) - timedelta(days=1)


def chats(user: Any, n: int, *, at: datetime | None = None) -> list[Conversation]:
    """``n`` chats of ``user``, the i-th last written at ``T0 + i`` minutes (or all at ``at``)."""
    rows = [Conversation(user=user, title=f"c{i}", last_message_at=at or T0 + timedelta(minutes=i)) for i in range(n)]
    return Conversation.objects.bulk_create(rows)


def newest_first(rows: list[Conversation]) -> list[uuid.UUID]:
    return [c.pk for c in sorted(rows, key=lambda c: (c.last_message_at, c.pk), reverse=True)]


def walk(ref: SessionRef, limit: int) -> list[uuid.UUID]:
    """Every chat, following next_cursor to the end."""
    seen: list[uuid.UUID] = []
    cursor = None
    while True:
        page = list_conversations(ref, impersonated=False, limit=limit, cursor=cursor)
        seen += [c.pk for c in page.conversations]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# -- chats -------------------------------------------------------------------------------


def test_list_conversations_gives_twenty_newest_first_by_default(ref: SessionRef, user: Any) -> None:
    rows = chats(user, 25)
    page = list_conversations(ref, impersonated=False)
    assert [c.pk for c in page.conversations] == newest_first(rows)[:20]
    assert page.next_cursor is not None


def test_list_conversations_clamps_the_limit_to_fifty(ref: SessionRef, user: Any) -> None:
    chats(user, 55)
    assert len(list_conversations(ref, impersonated=False, limit=500).conversations) == 50


@pytest.mark.parametrize("limit", [0, -1, "5", None, True])
def test_list_conversations_rejects_a_limit_below_one_or_not_an_int(ref: SessionRef, limit: Any) -> None:
    with pytest.raises(ValidationError) as invalid:
        list_conversations(ref, impersonated=False, limit=limit)
    assert "limit" in invalid.value.message_dict


def test_the_last_page_has_no_next_cursor(ref: SessionRef, user: Any) -> None:
    rows = chats(user, 5)
    first = list_conversations(ref, impersonated=False, limit=3)
    last = list_conversations(ref, impersonated=False, limit=3, cursor=first.next_cursor)
    assert [c.pk for c in last.conversations] == newest_first(rows)[3:]
    assert last.next_cursor is None


def test_a_page_that_ends_exactly_at_the_last_chat_has_no_next_cursor(ref: SessionRef, user: Any) -> None:
    chats(user, 4)
    assert list_conversations(ref, impersonated=False, limit=4).next_cursor is None


def test_chats_with_the_same_last_message_at_paginate_without_loss_or_duplicates(ref: SessionRef, user: Any) -> None:
    rows = chats(user, 7, at=T0) + chats(user, 3) + chats(user, 4, at=T0 + timedelta(hours=1))
    assert walk(ref, limit=2) == newest_first(rows)


def test_paging_through_all_chats_one_by_one_sees_each_once(ref: SessionRef, user: Any) -> None:
    rows = chats(user, 6, at=T0)
    assert walk(ref, limit=1) == newest_first(rows)


def test_a_chat_written_to_moves_to_the_top(ref: SessionRef, user: Any) -> None:
    rows = chats(user, 3)
    Conversation.objects.filter(pk=rows[0].pk).update(last_message_at=timezone.now())
    assert list_conversations(ref, impersonated=False).conversations[0].pk == rows[0].pk


def test_archived_and_deleted_chats_are_not_listed(ref: SessionRef, user: Any) -> None:
    kept, archived, deleted = (create_conversation(ref, {}, impersonated=False) for _ in range(3))
    archive_conversation(ref, archived.pk, impersonated=False)
    delete_conversation(ref, deleted.pk, impersonated=False)
    assert [c.pk for c in list_conversations(ref, impersonated=False).conversations] == [kept.pk]


def test_other_users_chats_are_not_listed(ref: SessionRef, others_chat: Conversation) -> None:
    assert list_conversations(ref, impersonated=False).conversations == []


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!!",
        "",
        b64(b"junk"),
        b64(b"\xff\xfe\x00"),
        b64(json.dumps({"a": 1}).encode()),
        b64(json.dumps([1, 2]).encode()),
        b64(json.dumps(["2024-01-01T00:00:00+00:00"]).encode()),
        b64(json.dumps(["2024-01-01T00:00:00+00:00", "not-a-uuid"]).encode()),
        b64(json.dumps(["2024-01-01T00:00:00+00:00", 5]).encode()),
        b64(json.dumps(["2024-01-01T00:00:00", str(uuid.uuid4())]).encode()),
        123,
        "A" * 400,
    ],
    ids=[
        "garbage",
        "empty",
        "b64_junk",
        "b64_binary",
        "b64_dict",
        "b64_numbers",
        "b64_one_item",
        "b64_bad_uuid",
        "b64_int_uuid",
        "naive_datetime",
        "int",
        "too_long",
    ],
)
def test_a_cursor_that_does_not_decode_is_invalid(ref: SessionRef, cursor: Any) -> None:
    with pytest.raises(InvalidCursor) as refused:
        list_conversations(ref, impersonated=False, cursor=cursor)
    assert refused.value.code == "invalid_cursor"


def test_list_conversations_does_not_load_messages(ref: SessionRef, user: Any) -> None:
    for chat in chats(user, 3):
        Message.objects.create(conversation=chat, seq=1, role="user", content="hi")
    with CaptureQueriesContext(connection) as queries:
        page = list_conversations(ref, impersonated=False)
    assert len(page.conversations) == 3
    assert not [q["sql"] for q in queries.captured_queries if '"agent_message"' in q["sql"]]


# -- messages ----------------------------------------------------------------------------


@pytest.fixture
def long_chat(chat: Conversation) -> Conversation:
    """A chat of 250 messages, seq 1..250, content "m<seq>"."""
    Message.objects.bulk_create(Message(conversation=chat, seq=i, role="user", content=f"m{i}") for i in range(1, 251))
    Conversation.objects.filter(pk=chat.pk).update(message_count=250)
    return chat


def seqs(views: list[dict[str, Any]]) -> list[int]:
    return [v["seq"] for v in views]


def message_id(chat: Conversation, seq: int) -> str:
    return str(Message.objects.get(conversation=chat, seq=seq).pk)


def test_list_messages_gives_the_first_fifty_oldest_first_by_default(ref: SessionRef, long_chat: Conversation) -> None:
    assert seqs(list_messages(ref, long_chat.pk, impersonated=False)) == list(range(1, 51))


def test_list_messages_latest_gives_the_last_page_oldest_first(ref: SessionRef, long_chat: Conversation) -> None:
    assert seqs(list_messages(ref, long_chat.pk, impersonated=False, latest=True, limit=10)) == list(range(241, 251))


def test_list_messages_before_gives_the_page_just_before_oldest_first(ref: SessionRef, long_chat: Conversation) -> None:
    page = list_messages(ref, long_chat.pk, impersonated=False, before=message_id(long_chat, 100), limit=10)
    assert seqs(page) == list(range(90, 100))


def test_list_messages_before_near_the_start_gives_what_there_is(ref: SessionRef, long_chat: Conversation) -> None:
    page = list_messages(ref, long_chat.pk, impersonated=False, before=message_id(long_chat, 4), limit=10)
    assert seqs(page) == [1, 2, 3]


def test_list_messages_after_gives_the_messages_after_that_one(ref: SessionRef, long_chat: Conversation) -> None:
    page = list_messages(ref, long_chat.pk, impersonated=False, after=message_id(long_chat, 100), limit=10)
    assert seqs(page) == list(range(101, 111))


def test_list_messages_after_the_last_message_is_empty(ref: SessionRef, long_chat: Conversation) -> None:
    assert list_messages(ref, long_chat.pk, impersonated=False, after=message_id(long_chat, 250)) == []


def test_list_messages_clamps_the_limit_to_two_hundred(ref: SessionRef, long_chat: Conversation) -> None:
    assert seqs(list_messages(ref, long_chat.pk, impersonated=False, limit=1000)) == list(range(1, 201))


@pytest.mark.parametrize("limit", [0, -1, "10", None])
def test_list_messages_rejects_a_limit_below_one_or_not_an_int(ref: SessionRef, chat: Conversation, limit: Any) -> None:
    with pytest.raises(ValidationError) as invalid:
        list_messages(ref, chat.pk, impersonated=False, limit=limit)
    assert "limit" in invalid.value.message_dict


def test_after_with_before_is_an_invalid_cursor(ref: SessionRef, long_chat: Conversation) -> None:
    with pytest.raises(InvalidCursor):
        list_messages(
            ref, long_chat.pk, impersonated=False, after=message_id(long_chat, 5), before=message_id(long_chat, 9)
        )


def test_after_with_latest_is_an_invalid_cursor(ref: SessionRef, long_chat: Conversation) -> None:
    with pytest.raises(InvalidCursor):
        list_messages(ref, long_chat.pk, impersonated=False, after=message_id(long_chat, 5), latest=True)


@pytest.mark.parametrize("direction", ["after", "before"])
def test_a_message_of_another_chat_as_cursor_is_invalid(
    ref: SessionRef, long_chat: Conversation, direction: str
) -> None:
    other = create_conversation(ref, {}, impersonated=False)
    foreign = Message.objects.create(conversation=other, seq=1, role="user", content="elsewhere")
    with pytest.raises(InvalidCursor):
        list_messages(ref, long_chat.pk, impersonated=False, **{direction: str(foreign.pk)})


@pytest.mark.parametrize("cursor", ["x", "", 123, str(uuid.UUID(int=1))])  # a fixed id: the same in every xdist worker
@pytest.mark.parametrize("direction", ["after", "before"])
def test_a_cursor_that_is_no_message_is_invalid(
    ref: SessionRef, long_chat: Conversation, direction: str, cursor: Any
) -> None:
    with pytest.raises(InvalidCursor):
        list_messages(ref, long_chat.pk, impersonated=False, **{direction: cursor})


def test_reading_pages_backwards_from_latest_sees_every_message_once(ref: SessionRef, long_chat: Conversation) -> None:
    page = list_messages(ref, long_chat.pk, impersonated=False, latest=True, limit=60)
    seen = seqs(page)
    while page:
        page = list_messages(ref, long_chat.pk, impersonated=False, before=page[0]["id"], limit=60)
        seen = seqs(page) + seen
    assert seen == list(range(1, 251))


def test_the_page_sizes_come_from_the_settings(ref, settings):
    from agent.conversations import add_message, create_conversation, list_conversations, list_messages

    settings.AGENT = {**settings.AGENT, "CHATS_PAGE": 2, "MESSAGES_PAGE": 3}
    chats = [create_conversation(ref, {}, impersonated=False) for _ in range(3)]
    for number in range(4):
        add_message(ref, chats[0].pk, {"content": f"m{number}"}, impersonated=False)
    assert len(list_conversations(ref, impersonated=False).conversations) == 2
    assert [m["content"] for m in list_messages(ref, chats[0].pk, impersonated=False)] == ["m0", "m1", "m2"]
