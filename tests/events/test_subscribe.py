"""Subscribing a Channels channel to a chat's group, on the real Redis layer."""

from __future__ import annotations

from typing import Any

import pytest

from agent import conversations
from agent.access import SessionRef
from agent.core import errors
from agent.models import AgentSettings, Conversation
from tests.support.layer import Listener

pytestmark = pytest.mark.django_db


def test_topic_is_the_chat_group_name(chat: Conversation) -> None:
    assert conversations.topic(chat.pk) == f"agent.conv.{chat.pk}"


def test_a_subscribed_channel_hears_the_chat_group(ref: SessionRef, chat: Conversation) -> None:
    listener = Listener()
    conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    assert listener.hears(conversations.topic(chat.pk))


def test_subscribing_twice_delivers_each_event_once(ref: SessionRef, chat: Conversation) -> None:
    listener = Listener()
    conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    listener.send_to_group(conversations.topic(chat.pk), {"type": "test.ping"})
    assert listener.receive() == {"type": "test.ping"}
    assert listener.is_quiet()


def test_an_unsubscribed_channel_no_longer_hears_the_chat(ref: SessionRef, chat: Conversation) -> None:
    listener = Listener()
    conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    conversations.unsubscribe(chat.pk, listener.name)
    assert not listener.hears(conversations.topic(chat.pk))


def test_unsubscribe_needs_no_session(ref: SessionRef, chat: Conversation, session: Any) -> None:
    listener = Listener()
    conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    session[0].logout()
    conversations.unsubscribe(str(chat.pk), listener.name)
    assert not listener.hears(conversations.topic(chat.pk))


def test_an_impersonated_subscribe_subscribes_nothing(ref: SessionRef, chat: Conversation) -> None:
    listener = Listener()
    with pytest.raises(errors.Impersonated):
        conversations.subscribe(ref, chat.pk, listener.name, impersonated=True)
    assert not listener.hears(conversations.topic(chat.pk))


def test_a_subscribe_of_a_logged_out_session_subscribes_nothing(
    ref: SessionRef, chat: Conversation, session: Any
) -> None:
    session[0].logout()
    listener = Listener()
    with pytest.raises(errors.SessionGone):
        conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    assert not listener.hears(conversations.topic(chat.pk))


def test_a_forbidden_subscribe_subscribes_nothing(ref: SessionRef, chat: Conversation) -> None:
    AgentSettings.objects.update_or_create(pk=1, defaults={"enabled": False})
    listener = Listener()
    with pytest.raises(errors.Forbidden):
        conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    assert not listener.hears(conversations.topic(chat.pk))


def test_a_subscribe_to_another_users_chat_subscribes_nothing(ref: SessionRef, others_chat: Conversation) -> None:
    listener = Listener()
    with pytest.raises(errors.NotFound):
        conversations.subscribe(ref, others_chat.pk, listener.name, impersonated=False)
    assert not listener.hears(conversations.topic(others_chat.pk))


def test_a_subscribe_to_a_deleted_chat_subscribes_nothing(ref: SessionRef, chat: Conversation) -> None:
    conversations.delete_conversation(ref, chat.pk, impersonated=False)
    listener = Listener()
    with pytest.raises(errors.NotFound):
        conversations.subscribe(ref, chat.pk, listener.name, impersonated=False)
    assert not listener.hears(conversations.topic(chat.pk))
