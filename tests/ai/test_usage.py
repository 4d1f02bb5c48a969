"""Usage sinks and the agent's own sink, ``link_to_message``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from agent.ai import AIError, complete
from agent.ai.usage import stored_by_caller
from agent.conversations import append_message
from agent.models import AIRequest, Message
from tests.support.factories import AIRequestFactory, ConversationFactory
from tests.support.model_server import error

RECEIVED: list[tuple[str, Any]] = []
SINKS = ["tests.ai.test_usage.broken_sink", "tests.ai.test_usage.recording_sink"]


def broken_sink(row: AIRequest) -> None:
    RECEIVED.append(("broken", row.pk))
    raise RuntimeError("this sink is broken")


def recording_sink(row: AIRequest) -> None:
    RECEIVED.append(("recording", row.pk))


@pytest.fixture(autouse=True)
def received() -> Any:
    RECEIVED.clear()
    with override_settings(AGENT={**settings.AGENT, "USAGE_SINKS": SINKS}):
        yield RECEIVED
    RECEIVED.clear()


def call(endpoint: Any, user: Any, **kwargs: Any) -> Any:
    return complete(
        endpoint, [{"role": "user", "content": "hi"}], user=user, source="agent", task="agent.chat", **kwargs
    )


def test_every_sink_gets_the_row_and_a_broken_one_does_not_break_the_call(
    endpoint, model_server, user, received, caplog
):
    caplog.set_level(logging.ERROR, logger="agent.ai.usage")

    completion = call(endpoint, user)

    row = AIRequest.objects.get()
    assert completion.request_id == row.pk
    assert received == [("broken", row.pk), ("recording", row.pk)]
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)


def test_an_error_row_reaches_the_sinks_and_the_call_raises_its_own_error(endpoint, model_server, user, received):
    model_server.push(error(429))

    with pytest.raises(AIError) as raised:
        call(endpoint, user)

    assert raised.value.code == "rate_limited"
    assert received == [("broken", raised.value.request_id), ("recording", raised.value.request_id)]


def test_a_sink_that_cannot_be_imported_is_skipped(endpoint, model_server, user, received):
    with override_settings(AGENT={**settings.AGENT, "USAGE_SINKS": ["tests.ai.no_such_module.sink", *SINKS]}):
        completion = call(endpoint, user)

    assert received == [("broken", completion.request_id), ("recording", completion.request_id)]


def test_a_guard_refused_call_writes_a_refused_row_that_reaches_no_sink(endpoint, model_server, user, received):
    AIRequestFactory(user=user, cost_usd=5)
    received.clear()

    with override_settings(AGENT={**settings.AGENT, "USAGE_SINKS": SINKS, "DAILY_COST_PER_USER": 1}):
        with pytest.raises(AIError) as raised:
            call(endpoint, user, admission="adm-1")

    refused = AIRequest.objects.get(status=AIRequest.Status.REFUSED)
    assert (raised.value.code, raised.value.limit) == ("budget_exceeded", "cost_per_user")
    assert (refused.pk, refused.error_code, refused.admission) == (raised.value.request_id, "budget_exceeded", "adm-1")
    assert received == []
    assert model_server.requests == []


def test_link_sets_the_row_on_a_message_of_its_own_user(endpoint, model_server, user):
    chat = ConversationFactory(user=user)
    message = append_message(chat.pk, role=Message.Role.ASSISTANT, content="stored elsewhere")

    completion = call(endpoint, user, attribution={"message": str(message.pk)})

    message.refresh_from_db()
    assert message.ai_request_id == completion.request_id


def test_link_leaves_another_users_message_alone(endpoint, model_server, user, make_user):
    chat = ConversationFactory(user=make_user())
    message = append_message(chat.pk, role=Message.Role.ASSISTANT, content="not yours")

    call(endpoint, user, attribution={"message": str(message.pk)})

    message.refresh_from_db()
    assert message.ai_request_id is None


def test_link_never_replaces_a_messages_row(endpoint, model_server, user):
    chat = ConversationFactory(user=user)
    first = call(endpoint, user)
    message = append_message(chat.pk, role=Message.Role.ASSISTANT, content="has one", ai_request_id=first.request_id)

    call(endpoint, user, attribution={"message": str(message.pk)})

    message.refresh_from_db()
    assert message.ai_request_id == first.request_id


def test_link_ignores_a_row_without_a_user(endpoint, model_server, user):
    chat = ConversationFactory(user=user)
    message = append_message(chat.pk, role=Message.Role.ASSISTANT, content="x")

    call(endpoint, None, attribution={"message": str(message.pk)})

    message.refresh_from_db()
    assert message.ai_request_id is None


def test_link_spares_the_message_its_caller_stores_itself(endpoint, model_server, user):
    chat = ConversationFactory(user=user)
    message = append_message(chat.pk, role=Message.Role.ASSISTANT, content="stored by the runner")

    with stored_by_caller(message.pk):
        call(endpoint, user, attribution={"message": str(message.pk)})
    call(endpoint, user, attribution={"message": str(message.pk)})

    message.refresh_from_db()
    assert message.ai_request_id == AIRequest.objects.order_by("-created_at").first().pk
