"""Finding chats over the page's API: the archive, restore, and search."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agent.models import Conversation
from tests.support.factories import ConversationFactory

pytestmark = pytest.mark.django_db


def titles(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [c["title"] for c in response.json()["conversations"]]


def test_the_list_shows_the_archive_apart(session, user):
    client, _ref = session
    ConversationFactory(user=user, title="Kept")
    ConversationFactory(user=user, title="Put away", status="archived")

    url = reverse("agent:conversation_list")
    assert titles(client.get(url)) == ["Kept"]
    assert titles(client.get(url, {"archived": "1"})) == ["Put away"]


def test_restore_over_http_needs_the_csrf_token_and_brings_the_chat_back(user):
    chat = ConversationFactory(user=user, title="Put away", status="archived")
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(user)
    url = reverse("agent:conversation_restore", args=[chat.pk])

    refused = guarded.post(url)
    guarded.get(reverse("agent:chat"))  # the page sets the CSRF cookie
    allowed = guarded.post(url, HTTP_X_CSRFTOKEN=guarded.cookies["csrftoken"].value)

    assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"
    assert allowed.status_code == 200 and allowed.json()["conversation"]["status"] == "active"
    assert Conversation.objects.get(pk=chat.pk).status == "active"


def test_restoring_someone_elses_chat_is_not_found(session):
    client, _ref = session
    other = ConversationFactory(status="archived")

    response = client.post(reverse("agent:conversation_restore", args=[other.pk]))

    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert Conversation.objects.get(pk=other.pk).status == "archived"


def test_search_answers_matches_and_a_blank_query_by_field(session, user):
    client, _ref = session
    ConversationFactory(user=user, title="Garden plans")
    ConversationFactory(user=user, title="Groceries")
    url = reverse("agent:conversation_list")

    assert titles(client.get(url, {"q": "garden"})) == ["Garden plans"]
    blank = client.get(url, {"q": " "})
    assert blank.status_code == 400 and list(blank.json()["fields"]) == ["q"]
