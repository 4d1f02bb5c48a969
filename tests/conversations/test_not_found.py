"""The chat rung of the access ladder: "not yours", "not there" and "not an id" are the same ``NotFound``."""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from agent import conversations
from agent.access import SessionRef
from agent.conversations import append_message
from agent.core.errors import NotFound
from agent.models import Conversation, Message
from tests.support.layer import Listener

pytestmark = pytest.mark.django_db

OPS: dict[str, Callable[[SessionRef, Any, Any, str], Any]] = {
    "get_conversation": lambda ref, cid, mid, ch: conversations.get_conversation(ref, cid, impersonated=False),
    "rename_conversation": lambda ref, cid, mid, ch: conversations.rename_conversation(
        ref, cid, "x", impersonated=False
    ),
    "archive_conversation": lambda ref, cid, mid, ch: conversations.archive_conversation(ref, cid, impersonated=False),
    "delete_conversation": lambda ref, cid, mid, ch: conversations.delete_conversation(ref, cid, impersonated=False),
    "add_message": lambda ref, cid, mid, ch: conversations.add_message(ref, cid, {"content": "x"}, impersonated=False),
    "list_messages": lambda ref, cid, mid, ch: conversations.list_messages(ref, cid, impersonated=False),
    "get_message": lambda ref, cid, mid, ch: conversations.get_message(ref, cid, mid, impersonated=False),
    "subscribe": lambda ref, cid, mid, ch: conversations.subscribe(ref, cid, ch, impersonated=False),
}

MALFORMED = {"empty": "", "x": "x", "none": None, "int": 123, "dotdot": "../", "missing_uuid": "uuid4"}


def _target(kind: str, ref: SessionRef, others_chat: Conversation) -> tuple[Any, Any]:
    """A chat id of the given kind and a message id that belongs to it if it has any."""
    if kind == "another_users_chat":
        return others_chat.pk, others_chat.messages.get().pk
    if kind == "own_deleted_chat":
        chat = conversations.create_conversation(ref, {}, impersonated=False)
        message = conversations.add_message(ref, chat.pk, {"content": "gone"}, impersonated=False)
        conversations.delete_conversation(ref, chat.pk, impersonated=False)
        return chat.pk, message.pk
    value = MALFORMED[kind]
    return (str(uuid.uuid4()) if value == "uuid4" else value), uuid.uuid4()


def _state() -> list[Any]:
    return list(Conversation.objects.order_by("pk").values_list("pk", "title", "status", "message_count"))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("kind", ["another_users_chat", "own_deleted_chat", *MALFORMED])
def test_every_door_answers_not_found_alike(ref: SessionRef, others_chat: Conversation, op: str, kind: str) -> None:
    chat_id, message_id = _target(kind, ref, others_chat)
    listener = Listener()
    before = _state(), Message.objects.count()
    with pytest.raises(NotFound) as refused:
        OPS[op](ref, chat_id, message_id, listener.name)
    assert type(refused.value) is NotFound and refused.value.code == "not_found"
    assert (_state(), Message.objects.count()) == before
    if op == "subscribe" and isinstance(chat_id, uuid.UUID):
        assert not listener.hears(conversations.topic(chat_id))


def test_another_users_chat_and_a_missing_one_raise_the_same_error(ref: SessionRef, others_chat: Conversation) -> None:
    with pytest.raises(NotFound) as theirs:
        conversations.get_conversation(ref, others_chat.pk, impersonated=False)
    with pytest.raises(NotFound) as missing:
        conversations.get_conversation(ref, uuid.uuid4(), impersonated=False)
    assert (type(theirs.value), theirs.value.args, theirs.value.params) == (
        type(missing.value),
        missing.value.args,
        missing.value.params,
    )


def test_a_message_of_another_of_my_chats_is_not_found(ref: SessionRef, chat: Conversation) -> None:
    elsewhere = conversations.create_conversation(ref, {}, impersonated=False)
    message = conversations.add_message(ref, elsewhere.pk, {"content": "hi"}, impersonated=False)
    with pytest.raises(NotFound):
        conversations.get_message(ref, chat.pk, message.pk, impersonated=False)


def test_a_message_of_another_users_chat_is_not_found_through_my_chat(
    ref: SessionRef, chat: Conversation, others_chat: Conversation
) -> None:
    with pytest.raises(NotFound):
        conversations.get_message(ref, chat.pk, others_chat.messages.get().pk, impersonated=False)


@pytest.mark.parametrize(
    "message_id", ["", "x", None, 123, "../", str(uuid.UUID(int=1))]
)  # a fixed id: the same in every xdist worker
def test_a_malformed_or_missing_message_id_is_not_found(ref: SessionRef, chat: Conversation, message_id: Any) -> None:
    append_message(chat.pk, role=Message.Role.USER, content="hi")
    with pytest.raises(NotFound):
        conversations.get_message(ref, chat.pk, message_id, impersonated=False)


def test_archive_cannot_bring_a_deleted_chat_back(ref: SessionRef, chat: Conversation) -> None:
    conversations.delete_conversation(ref, chat.pk, impersonated=False)
    with pytest.raises(NotFound):
        conversations.archive_conversation(ref, chat.pk, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).status == Conversation.Status.DELETED
