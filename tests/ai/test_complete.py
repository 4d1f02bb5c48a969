"""``agent.ai.complete`` through the real ``openai`` client against the scripted server."""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.forms.models import model_to_dict
from django.test import override_settings

from agent.ai import AIError, complete
from agent.ai.client import client_for
from agent.models import AIRequest, Endpoint
from tests.support.factories import EndpointFactory
from tests.support.model_server import answer, error
from tests.support.waiting import free_port

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
PROVIDER_TEXT = "PROVIDER-SAYS-account-4711-is-overdrawn"


def call(endpoint: Any, user: Any, **kwargs: Any) -> Any:
    return complete(endpoint, kwargs.pop("messages", MESSAGES), user=user, source="agent", task="agent.chat", **kwargs)


def row_text(row: AIRequest) -> str:
    """Every stored field of a journal row as one string, to search for leaked text."""
    return repr(model_to_dict(row)) + repr(row.attribution) + repr(row.captured)


def authorization(headers: dict[str, str]) -> str | None:
    """The Authorization header as received (HTTP header names are case-insensitive)."""
    return {k.lower(): v for k, v in headers.items()}.get("authorization")


def test_success_writes_one_journal_row_before_returning(endpoint, model_server, user):
    model_server.push(answer("hi there", delay=0.2))

    completion = call(endpoint, user)

    row = AIRequest.objects.get()
    assert completion.content == "hi there"
    assert completion.request_id == row.pk
    assert row.status == AIRequest.Status.SUCCESS and row.error_code == ""
    assert (row.input_tokens, row.output_tokens) == (100, 20)
    assert row.cost_usd == Decimal(100 * 2 + 20 * 8) / Decimal(1_000_000)
    assert completion.cost_usd == row.cost_usd
    assert row.latency_ms >= 200
    assert row.model == "scripted-model"
    assert (row.user, row.endpoint, row.source, row.task) == (user, endpoint, "agent", "agent.chat")


def test_provider_reported_cost_wins_over_prices(endpoint, model_server, user):
    model_server.push(
        answer("hi", usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "cost": 0.125})
    )

    completion = call(endpoint, user)

    assert AIRequest.objects.get().cost_usd == Decimal("0.125") == completion.cost_usd


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, "invalid_api_key"),
        (403, "api_key_forbidden"),
        (404, "model_not_found"),
        (429, "rate_limited"),
        (500, "api_error"),
        (502, "api_error"),
        (400, "api_error"),
    ],
)
def test_error_status_maps_to_its_code_with_one_clean_row(endpoint, model_server, user, status, code):
    model_server.push(error(status, message=PROVIDER_TEXT))

    with pytest.raises(AIError) as raised:
        call(endpoint, user, capture=True)

    row = AIRequest.objects.get()
    assert (raised.value.code, raised.value.status) == (code, status)
    assert raised.value.request_id == row.pk
    assert (row.status, row.error_code, row.http_status) == (AIRequest.Status.ERROR, code, status)
    assert PROVIDER_TEXT not in row_text(row) and PROVIDER_TEXT not in str(raised.value)
    assert row.captured is None


def test_answer_slower_than_the_endpoint_timeout_is_request_timeout(endpoint, model_server, user):
    endpoint.timeout_s = 1
    endpoint.save()
    model_server.push(answer("too late", delay=2.5))

    with pytest.raises(AIError) as raised:
        call(endpoint, user)

    row = AIRequest.objects.get()
    assert raised.value.code == "request_timeout"
    assert (row.status, row.error_code, row.http_status) == (AIRequest.Status.ERROR, "request_timeout", None)
    assert 900 <= row.latency_ms < 2400


def test_closed_port_is_connection_error(endpoint, user):
    endpoint.base_url = f"http://127.0.0.1:{free_port()}/v1"
    endpoint.save()

    with pytest.raises(AIError) as raised:
        call(endpoint, user)

    row = AIRequest.objects.get()
    assert raised.value.code == "connection_error"
    assert (row.status, row.error_code, row.http_status) == (AIRequest.Status.ERROR, "connection_error", None)


@pytest.mark.parametrize(
    "raw",
    [
        {"choices": []},
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": {"a": 1}}}],
        },
        b"<html>" + PROVIDER_TEXT.encode() + b"</html>",
    ],
    ids=["no-choices", "content-not-text", "not-json"],
)
def test_malformed_200_body_is_invalid_response(endpoint, model_server, user, raw):
    model_server.push({"raw": raw})

    with pytest.raises(AIError) as raised:
        call(endpoint, user)

    row = AIRequest.objects.get()
    assert raised.value.code == "invalid_response"
    assert (row.status, row.error_code) == (AIRequest.Status.ERROR, "invalid_response")
    assert PROVIDER_TEXT not in row_text(row)


def test_no_endpoint_is_endpoint_not_configured(db, model_server, user):
    with pytest.raises(AIError) as raised:
        call(None, user)

    row = AIRequest.objects.get()
    assert raised.value.code == "endpoint_not_configured"
    assert (row.status, row.error_code, row.endpoint) == (AIRequest.Status.ERROR, "endpoint_not_configured", None)
    assert model_server.requests == []


def test_disabled_endpoint_is_endpoint_disabled_and_not_called(endpoint, model_server, user):
    endpoint.enabled = False
    endpoint.save()

    with pytest.raises(AIError) as raised:
        call(endpoint, user)

    assert raised.value.code == "endpoint_disabled"
    assert AIRequest.objects.get().error_code == "endpoint_disabled"
    assert model_server.requests == []


def test_sdk_retries_a_500_when_retries_are_on(endpoint, model_server, user):
    model_server.push(error(500), answer("second time lucky"))

    with override_settings(AGENT={**settings.AGENT, "MODEL_MAX_RETRIES": 2}):
        completion = call(endpoint, user)

    assert completion.content == "second time lucky"
    assert len(model_server.requests) == 2
    assert list(AIRequest.objects.values_list("status", flat=True)) == [AIRequest.Status.SUCCESS]


def test_without_retries_a_500_is_one_request(endpoint, model_server, user):
    model_server.push(error(500), answer("never asked"))

    with pytest.raises(AIError):
        call(endpoint, user)

    assert len(model_server.requests) == 1


def test_messages_and_tools_are_sent_as_given(endpoint, model_server, user):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "notes_search",
                "description": "Search notes.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    messages = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "notes_search", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"notes": []}'},
    ]

    call(endpoint, user, messages=messages, tools=tools)

    body = model_server.requests[0]
    assert body["model"] == "scripted-model"
    assert body["messages"] == messages
    assert body["tools"] == tools


def test_no_tools_key_without_tools(endpoint, model_server, user):
    call(endpoint, user)

    assert "tools" not in model_server.requests[0]


def test_api_key_is_the_bearer_header_and_never_stored(endpoint, model_server, user):
    model_server.push(answer("ok"), error(500))

    call(endpoint, user, capture=True)
    with pytest.raises(AIError):
        call(endpoint, user, capture=True)

    assert [authorization(h) for h in model_server.headers] == ["Bearer sk-test-secret"] * 2
    assert AIRequest.objects.count() == 2
    for row in AIRequest.objects.all():
        assert "sk-test-secret" not in row_text(row)


def test_api_key_env_reads_the_environment_variable(endpoint, model_server, user, monkeypatch):
    monkeypatch.setenv("AGENT_KEY_TEST_MODEL", "sk-from-the-environment")
    endpoint.api_key, endpoint.api_key_env = "", "AGENT_KEY_TEST_MODEL"
    endpoint.save()

    call(endpoint, user)

    assert authorization(model_server.headers[0]) == "Bearer sk-from-the-environment"


def test_capture_on_stores_the_content(endpoint, model_server, user):
    model_server.push(answer("the answer"))

    call(endpoint, user, capture=True)

    assert AIRequest.objects.get().captured == {"messages": MESSAGES, "answer": "the answer"}


def test_capture_off_stores_no_content(endpoint, model_server, user):
    model_server.push(answer("the answer"))

    call(endpoint, user, capture=False)

    row = AIRequest.objects.get()
    assert row.captured is None
    assert "the answer" not in row_text(row) and "hello" not in row_text(row)


def test_attribution_and_admission_are_journalled(endpoint, model_server, user):
    call(endpoint, user, admission="adm-1", attribution={"message": "m-1", "turn": "t-1"})

    row = AIRequest.objects.get()
    assert (row.admission, row.attribution) == ("adm-1", {"message": "m-1", "turn": "t-1"})


def test_one_client_per_endpoint_per_process(endpoint, model_server):
    other = EndpointFactory(name="other", base_url=model_server.base_url, api_key="sk-other", model="m")

    first = client_for(endpoint)

    assert client_for(Endpoint.objects.get(pk=endpoint.pk)) is first
    assert client_for(other) is not first


def test_a_call_under_way_survives_its_endpoint_edited_in_another_thread(endpoint, model_server):
    """Workers run turns in threads: the client an edit replaces is left to close when no call uses it."""
    model_server.push(answer("slow but whole", delay=1.0))
    first = client_for(endpoint)
    got: list[Any] = []
    caller = threading.Thread(
        target=lambda: got.append(first.post("/chat/completions", body={"model": "m", "messages": []}, cast_to=bytes))
    )
    caller.start()
    assert model_server.received.wait(5)
    endpoint.timeout_s = 7
    endpoint.save()
    assert client_for(endpoint) is not first
    caller.join(10)
    assert got and b"slow but whole" in got[0]
