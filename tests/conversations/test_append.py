"""``append_message`` fenced by a lease: stored with the chat's counters only while the lease is held
, in one statement on PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models.signals import post_save, pre_save
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent.conversations import LeaseLost, append_message
from agent.core.errors import NotFound
from agent.models import Conversation, Lock, Message

pytestmark = pytest.mark.django_db


def _lease(chat: Any, holder: Any, *, seconds: int = 30) -> tuple[str, Any]:
    name = f"chat:{chat.pk}"
    Lock.objects.update_or_create(
        name=name, defaults={"holder": holder, "fence": 1, "expires_at": timezone.now() + timedelta(seconds=seconds)}
    )
    return name, holder


def test_a_message_with_its_lease_and_the_chats_counters_is_one_statement(chat: Any) -> None:
    lease = _lease(chat, uuid.uuid4())
    with CaptureQueriesContext(connection) as queries:
        message = append_message(chat.pk, role=Message.Role.USER, content="hello", title_from="hello", lease=lease)
    chat.refresh_from_db()
    stored = Message.objects.get(pk=message.pk)
    assert len(queries) == (1 if connection.vendor == "postgresql" else 3)
    assert (stored.seq, stored.content, chat.message_count, chat.title) == (1, "hello", 1, "hello")
    assert message.seq == 1 and not message._state.adding


@pytest.mark.parametrize("how", ["taken over", "run out", "released"])
def test_a_lease_that_is_not_held_stores_nothing(chat: Any, how: str) -> None:
    holder = uuid.uuid4()
    if how == "taken over":
        lease = (_lease(chat, uuid.uuid4())[0], holder)
    elif how == "run out":
        lease = _lease(chat, holder, seconds=-1)
    else:
        lease = (f"chat:{chat.pk}", holder)
    with pytest.raises(LeaseLost):
        append_message(chat.pk, role=Message.Role.ASSISTANT, content="late", lease=lease)
    chat.refresh_from_db()
    assert chat.message_count == 0 and not Message.objects.filter(conversation=chat).exists()


def test_a_deleted_chat_under_a_held_lease_is_not_found(chat: Any) -> None:
    lease = _lease(chat, uuid.uuid4())
    Conversation.objects.filter(pk=chat.pk).update(status=Conversation.Status.DELETED)
    with pytest.raises(NotFound):
        append_message(chat.pk, role=Message.Role.ASSISTANT, content="late", lease=lease)
    assert not Message.objects.filter(conversation=chat).exists()


def test_the_stored_fields_are_the_ones_given(chat: Any) -> None:
    answer = append_message(chat.pk, role=Message.Role.ASSISTANT, content="", tool_calls=[{"id": "c1", "name": "x"}])
    tool = append_message(
        chat.pk,
        role=Message.Role.TOOL,
        tool_name="x",
        tool_call_id="c1",
        tool_outcome="ok",
        tool_result={"n": [1, 2]},
        assistant_message=answer,
        lease=_lease(chat, uuid.uuid4()),
    )
    row = Message.objects.get(pk=tool.pk)
    assert (row.seq, row.tool_result, row.assistant_message_id, row.notice_params) == (2, {"n": [1, 2]}, answer.pk, {})
    assert Message.objects.get(pk=answer.pk).tool_calls == [{"id": "c1", "name": "x"}]


def test_the_users_message_of_a_turn_is_named_by_the_turn_in_the_same_statement(
    ref: Any, chat: Any, endpoint: Any
) -> None:
    from agent import turns
    from agent.models import Turn

    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    lease = (f"chat:{chat.pk}", turn.pk)
    with CaptureQueriesContext(connection) as queries:
        message = append_message(
            chat.pk, role=Message.Role.USER, content="hello", turn=turn, lease=lease, link_turn=True
        )
    assert len(queries) == (1 if connection.vendor == "postgresql" else 4)
    assert Turn.objects.get(pk=turn.pk).user_message_id == message.pk


def test_a_message_sends_pre_save_and_post_save_as_a_save_would(chat: Any) -> None:
    heard: list[tuple[str, Any, Any]] = []

    def before(sender: Any, instance: Any, **kwargs: Any) -> None:
        heard.append(("pre_save", instance.seq, kwargs.get("raw")))

    def after(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
        heard.append(("post_save", instance.seq, created))

    pre_save.connect(before, sender=Message)
    post_save.connect(after, sender=Message)
    try:
        append_message(chat.pk, role=Message.Role.USER, content="hello")
    finally:
        pre_save.disconnect(before, sender=Message)
        post_save.disconnect(after, sender=Message)
    assert heard == [("pre_save", 0, False), ("post_save", 1, True)]


@pytest.mark.parametrize("skew", [timedelta(minutes=-5), timedelta(minutes=5)])
def test_the_fence_reads_the_databases_clock_not_the_hosts(chat: Any, monkeypatch: Any, skew: timedelta) -> None:
    # given: a lease that ran out a second ago by the database's clock, and one still live
    gone, live = _lease(chat, uuid.uuid4(), seconds=-1), (f"chat:other-{chat.pk}", uuid.uuid4())
    Lock.objects.create(name=live[0], holder=live[1], expires_at=timezone.now() + timedelta(seconds=30))
    # when: this host's clock runs minutes off the database's
    real = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real() + skew)
    # then: the run-out lease fences the write out and the live one lets it through, whichever way the clock is off
    with pytest.raises(LeaseLost):
        append_message(chat.pk, role=Message.Role.ASSISTANT, content="late", lease=gone)
    assert append_message(chat.pk, role=Message.Role.ASSISTANT, content="in time", lease=live).content == "in time"
