"""New chats a minute (``NEW_CHATS_PER_MINUTE``): counted from the database, held per user, told in words."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent import conversations
from agent.access import SessionRef
from agent.core.errors import TooManyChats
from agent.models import Conversation
from tests.support.races import at_once
from tests.support.sessions import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_a_minute(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "NEW_CHATS_PER_MINUTE": 3}


def create(ref: SessionRef) -> Conversation:
    return conversations.create_conversation(ref, {}, impersonated=False)


def test_the_chat_past_the_cap_in_a_minute_is_refused_with_its_standing(ref: SessionRef, three_a_minute: None) -> None:
    for _ in range(3):
        create(ref)
    with pytest.raises(TooManyChats) as refused:
        create(ref)
    params = refused.value.params
    assert (refused.value.code, refused.value.http_status) == ("too_many_chats", 429)
    assert (params["limit"], params["cap"], params["used"]) == ("new_chats_per_minute", 3, 3)
    assert params["frees_at"] and "You started 3 chats in the last minute" in params["message"]
    assert Conversation.objects.count() == 3


def test_a_slot_frees_up_once_a_chat_is_a_minute_old(ref: SessionRef, three_a_minute: None) -> None:
    for _ in range(3):
        create(ref)
    oldest = Conversation.objects.order_by("created_at").first()
    Conversation.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    create(ref)
    with pytest.raises(TooManyChats):
        create(ref)


def test_deleted_chats_still_count_and_other_users_do_not(
    ref: SessionRef, make_user: Any, three_a_minute: None
) -> None:
    for _ in range(3):
        conversations.delete_conversation(ref, create(ref).pk, impersonated=False)
    with pytest.raises(TooManyChats):
        create(ref)
    _client, someone_else = login(make_user())
    create(someone_else)


def test_zero_is_no_cap(ref: SessionRef, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "NEW_CHATS_PER_MINUTE": 0}
    for _ in range(25):
        create(ref)
    assert Conversation.objects.count() == 25


def test_the_api_answers_429_with_the_message_the_page_shows(session: tuple[Client, SessionRef], settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "NEW_CHATS_PER_MINUTE": 1}
    client, _ref = session
    url = reverse("agent:conversation_create")
    assert client.post(url, {}, content_type="application/json").status_code == 200
    refused = client.post(url, {}, content_type="application/json")
    assert refused.status_code == 429
    body = refused.json()
    assert body["error"] == "too_many_chats" and "the most allowed is 1" in body["message"]
    assert body["limit"]["cap"] == 1 and body["limit"]["used"] == 1


@pytest.mark.django_db(transaction=True)
def test_chats_created_at_once_never_pass_the_cap(ref: SessionRef, settings: Any) -> None:
    # given: a cap of 4 and 10 creates released together, each on its own connection
    settings.AGENT = {**settings.AGENT, "NEW_CHATS_PER_MINUTE": 4}
    outcomes = at_once(*[lambda: create(ref)] * 10)
    # then: exactly the cap passed; every other one was refused
    assert [kind for kind, _value in outcomes].count("ok") == 4
    assert all(isinstance(value, TooManyChats) for kind, value in outcomes if kind == "error")
    assert Conversation.objects.count() == 4
