"""The MCP server with the official ``mcp`` client over real HTTP, against two daphne hosts on one
database and one Redis: who may call, what is listed, a read, writes as cards (confirmed on the page,
or in the client through elicitation), revocation of every right, and the per-token cap."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, Iterator

import httpx2
import mcp_types as types
import pytest
from django.db import connection
from django.urls import reverse
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent.access import McpRef, authorize_session
from agent.mcp import issue_token, revoke_token
from agent.mcp.tokens import digest
from agent.models import Confirmation, Conversation, McpCall, McpToken, Message
from agent.tools import visible_for
from tests.notes.models import Note
from tests.support.browser import AsgiServer
from tests.support.factories import UserFactory, UserSettingsFactory
from tests.support.sessions import csrf_client, grant

pytestmark = pytest.mark.django_db(transaction=True)

CALLS_PER_MINUTE = 8
INLINE_MAX = 4  # a writer sees more tools than one request carries: the listing adds find_tools
MAX_BODY = 4096
MCP_PATH = "/assistant/mcp/"


@pytest.fixture(scope="module")
def hosts(django_db_setup: Any, django_db_blocker: Any) -> Iterator[tuple[AsgiServer, AsgiServer]]:
    """Two daphne processes of the site on the test database and the same Redis."""
    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    servers = (AsgiServer(name), AsgiServer(name))
    for server in servers:
        own = {
            "MCP": {},
            "MCP_CALLS_PER_MINUTE": CALLS_PER_MINUTE,
            "MCP_MAX_REQUEST_BYTES": MAX_BODY,
            "TOOLS_INLINE_MAX": INLINE_MAX,
        }
        server.env["AGENT_TEST_SETTINGS"] = json.dumps(own)
        server.start()
    yield servers
    for server in servers:
        server.stop()


def member(*permissions: str) -> Any:
    user = UserFactory()
    return grant(user, "agent.use_agent", "agent.use_mcp", *permissions)


WRITER = ("notes.view_note", "notes.add_note", "notes.change_note")


class Hops:
    """An HTTP client for the MCP client whose requests alternate between the hosts, as a balancer
    with no affinity sends them; it remembers which host each request reached."""

    def __init__(self, servers: tuple[AsgiServer, ...], token: str) -> None:
        self.ports = itertools.cycle([server.port for server in servers])
        self.reached: list[int] = []
        self.token = token

    def http(self) -> httpx2.AsyncClient:
        async def hop(request: Any) -> None:
            port = next(self.ports)
            request.url = request.url.copy_with(port=port)
            request.headers["Host"] = f"127.0.0.1:{port}"
            self.reached.append(port)

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx2.AsyncClient(headers=headers, event_hooks={"request": [hop]}, timeout=30)


def connect(servers: tuple[AsgiServer, ...], token: str, **options: Any) -> tuple[Client, Hops]:
    hops = Hops(servers, token)
    url = servers[0].url + MCP_PATH
    return Client(streamable_http_client(url, http_client=hops.http()), **options), hops


def run(coroutine: Any) -> Any:
    """The coroutine's result; the one error of a client's task group raised as itself."""
    try:
        return asyncio.run(coroutine)
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None


def post(server: AsgiServer, token: str = "", **body: Any) -> httpx2.Response:
    """A bare JSON-RPC POST, to read the HTTP answer a client gets."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", **body}
    return httpx2.post(server.url + MCP_PATH, json=request, headers=headers, timeout=30)


async def call(
    servers: tuple[AsgiServer, ...], token: str, name: str, arguments: dict[str, Any], **options: Any
) -> Any:
    client, _hops = connect(servers, token, **options)
    async with client:
        return await client.call_tool(name, arguments)


# -- who may call --------------------------------------------------------------------------------


def test_a_request_without_a_token_is_401_naming_the_resource_metadata(hosts: Any) -> None:
    first = hosts[0]
    response = post(first)
    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and "error=" not in challenge
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    assert metadata_url == first.url + reverse("agent:mcp_metadata")
    metadata = httpx2.get(metadata_url, timeout=30).json()
    assert metadata["resource"] == first.url + MCP_PATH
    assert metadata["scopes_supported"] == ["agent"] and metadata["bearer_methods_supported"] == ["header"]
    assert "authorization_servers" not in metadata  # this site signs no one in with OAuth
    assert httpx2.get(first.url + "/.well-known/oauth-protected-resource/assistant/mcp/", timeout=30).json() == metadata

    wrong = post(first, "agm_not-a-token")
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]
    with pytest.raises(MCPError):
        run(call(hosts, "", "notes_search", {}))


def test_the_listing_is_the_users_visible_tools_now(hosts: Any) -> None:
    reader = member("notes.view_note")
    token = issue_token(reader, "Claude Desktop")

    async def names() -> list[list[str]]:
        client, hops = connect(hosts, token)
        async with client:
            listed = [sorted(t.name for t in (await client.list_tools()).tools) for _ in range(2)]
        assert set(hops.reached) == {server.port for server in hosts}  # both hosts answered
        return listed

    scope = authorize_session(McpRef(digest(token)), impersonated=False)
    expected = sorted(tool.name for tool in visible_for(scope))
    assert "notes_search" in expected and "notes_create" not in expected  # a write needs notes.add_note
    assert run(names()) == [expected, expected]

    grant(reader, "notes.add_note")  # a right given now shows at the next listing
    scope = authorize_session(McpRef(digest(token)), impersonated=False)
    now = sorted(tool.name for tool in visible_for(scope))
    assert "notes_create" in now and run(names())[0] == now
    listed = McpCall.objects.filter(token__user=reader, method="tools/list")
    assert listed.count() == 4 and set(listed.values_list("token_name", flat=True)) == {"Claude Desktop"}


def test_a_user_with_more_tools_than_a_request_carries_gets_find_tools_too(hosts: Any) -> None:
    few, many = member("notes.view_note"), member(*WRITER)
    assert len(visible_for(authorize_session(McpRef(digest(issue_token(many, "x"))), impersonated=False))) > INLINE_MAX

    async def listed(token: str) -> list[str]:
        client, _hops = connect(hosts, token)
        async with client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert "find_tools" not in run(listed(issue_token(few, "Few")))
    token = issue_token(many, "Many")
    names = run(listed(token))
    assert names[-1] == "find_tools" and "notes_retitle" in names  # every visible tool still listed
    found = run(call(hosts, token, "find_tools", {"query": "rename a note title", "limit": 2}))
    assert not found.is_error and found.structured_content["tools"][0]["name"] == "notes_retitle"
    refused = run(call(hosts, issue_token(few, "Few again"), "find_tools", {"query": "note"}))
    assert refused.is_error  # offered only where the tools are many


def test_a_read_returns_structured_content_and_text_and_is_journalled(hosts: Any) -> None:
    user = member("notes.view_note")
    Note.objects.create(owner=user, title="Groceries")
    Note.objects.create(owner=UserFactory(), title="Groceries of someone else")
    token = issue_token(user, "Cursor")

    result = run(call(hosts, token, "notes_search", {"query": "Groceries"}))

    assert result.is_error is False
    assert [note["title"] for note in result.structured_content["notes"]] == ["Groceries"]
    assert json.loads(result.content[0].text) == result.structured_content
    entry = McpCall.objects.get(token__user=user, method="tools/call")
    assert (entry.tool_name, entry.outcome, entry.token_name) == ("notes_search", "ok", "Cursor")
    assert McpToken.objects.get(user=user).last_used_at is not None


def test_errors_are_tool_results_in_the_users_language(hosts: Any) -> None:

    user = member("notes.view_note")
    UserSettingsFactory(user=user, language="ru")
    token = issue_token(user, "VS Code")

    refused = run(call(hosts, token, "notes_create", {"title": "x"}))  # a write without notes.add_note
    invalid = run(call(hosts, token, "notes_read", {"note_id": "one"}))

    assert refused.is_error and refused.structured_content["outcome"] == "denied"
    assert refused.content[0].text == "Этот инструмент недоступен."
    assert invalid.is_error and invalid.structured_content["outcome"] == "invalid_arguments"
    assert "Traceback" not in invalid.content[0].text


# -- writes are cards ----------------------------------------------------------------------------


def test_a_write_without_elicitation_waits_as_a_card_confirmed_on_the_page_once(hosts: Any) -> None:
    user = member(*WRITER)
    token = issue_token(user, "ChatGPT")

    result = run(call(hosts, token, "notes_create", {"title": "From the client", "body": "text"}, mode="legacy"))

    assert result.is_error is False
    data = result.structured_content
    assert data["status"] == "confirmation_required"
    confirmation = Confirmation.objects.get(pk=data["confirmation_id"])
    assert confirmation.status == "waiting" and confirmation.user_id == user.pk
    assert data["url"] == hosts[0].url + reverse("agent:chat_open", args=[confirmation.conversation_id])
    chat = Conversation.objects.get(pk=confirmation.conversation_id)
    assert chat.title == "ChatGPT (MCP)"  # an older client gives no name in a stateless call: the token's
    shown = Message.objects.get(conversation=chat, role="tool")
    assert shown.confirmation_id == confirmation.pk and shown.tool_outcome == "needs_confirmation"
    assert not Note.objects.filter(owner=user).exists()

    page, csrf = csrf_client(user)
    door = reverse("agent:confirmation_confirm", args=[confirmation.pk])
    first = page.post(door, "{}", content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    again = page.post(door, "{}", content_type="application/json", HTTP_X_CSRFTOKEN=csrf)

    assert first.status_code == 200 and first.json()["confirmation"]["status"] == "done"
    assert again.status_code != 200
    assert list(Note.objects.filter(owner=user).values_list("title", "body")) == [("From the client", "text")]

    second = run(call(hosts, token, "notes_create", {"title": "Another", "body": ""}, mode="legacy"))
    assert Confirmation.objects.get(pk=second.structured_content["confirmation_id"]).conversation_id == chat.pk


def test_a_write_asked_through_elicitation_and_accepted_with_an_edit_runs_once_with_it(hosts: Any) -> None:
    user = member(*WRITER)
    note = Note.objects.create(owner=user, title="Old title")
    token = issue_token(user, "Token name")
    asked: list[Any] = []

    async def accept_with_edit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"title": "Edited title"})

    async def flow() -> tuple[Any, list[int]]:
        client, hops = connect(
            hosts,
            token,
            elicitation_callback=accept_with_edit,
            client_info=types.Implementation(name="Claude", version="1"),
        )
        async with client:
            result = await client.call_tool("notes_retitle", {"note_id": note.pk, "title": "Model's title"})
        return result, hops.reached

    result, reached = run(flow())

    assert result.is_error is False
    assert result.structured_content["status"] == "done"
    (question,) = asked
    assert question.requested_schema["properties"]["title"]["default"] == "Model's title"
    assert "note_id" not in question.requested_schema["properties"]  # not editable: shown in the message only
    assert set(reached) == {server.port for server in hosts}  # the answer came back through the other host
    note.refresh_from_db()
    assert note.title == "Edited title"
    confirmation = Confirmation.objects.get(pk=result.structured_content["confirmation_id"])
    assert confirmation.status == "done" and confirmation.edits == {"title": "Edited title"}
    assert Conversation.objects.get(pk=confirmation.conversation_id).title == "Claude (MCP)"
    assert Message.objects.filter(confirmation=confirmation, notice_code="confirmation_done").count() == 1


def test_a_write_declined_in_the_client_is_cancelled(hosts: Any) -> None:
    user = member(*WRITER)
    note = Note.objects.create(owner=user, title="Keep me")
    token = issue_token(user, "Claude")

    async def decline(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    result = run(
        call(hosts, token, "notes_retitle", {"note_id": note.pk, "title": "Gone"}, elicitation_callback=decline)
    )

    assert result.structured_content["status"] == "cancelled"
    note.refresh_from_db()
    assert note.title == "Keep me"
    assert Confirmation.objects.get(pk=result.structured_content["confirmation_id"]).status == "cancelled"


# -- revocation and the cap ----------------------------------------------------------------------


def test_revoking_the_token_use_mcp_or_the_user_refuses_the_next_call(hosts: Any) -> None:
    user = member("notes.view_note")
    token = issue_token(user, "One")
    assert not run(call(hosts, token, "notes_search", {})).is_error

    assert revoke_token(user, "One")
    with pytest.raises(MCPError):
        run(call(hosts, token, "notes_search", {}))

    token = issue_token(user, "Two")
    user.user_permissions.remove(user.user_permissions.get(codename="use_mcp"))
    refused = post(hosts[1], token)
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    with pytest.raises(MCPError):
        run(call(hosts, token, "notes_search", {}))

    grant(user, "agent.use_mcp")
    assert not run(call(hosts, token, "notes_search", {})).is_error
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    refused = post(hosts[0], token)
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["WWW-Authenticate"]


def test_a_request_body_over_the_limit_is_refused_before_it_is_read_as_json(hosts: Any) -> None:
    user = member("notes.view_note")
    token = issue_token(user, "Big")
    params = {"name": "notes_search", "arguments": {"query": "x" * MAX_BODY}}
    refused = post(hosts[0], token, method="tools/call", params=params)
    assert refused.status_code == 413
    assert not McpCall.objects.filter(token__user=user).exists()


def test_an_expired_token_is_refused(hosts: Any) -> None:
    user = member("notes.view_note")
    token = issue_token(user, "Old", days=1)
    McpToken.objects.filter(user=user).update(expires_at="2020-01-01T00:00:00Z")
    refused = post(hosts[0], token)
    assert refused.status_code == 401


def test_calls_past_the_per_minute_cap_get_an_error_saying_when_to_retry(hosts: Any) -> None:
    user = member("notes.view_note")
    token = issue_token(user, "Busy")

    async def many() -> tuple[int, MCPError]:
        client, _hops = connect(hosts, token)
        async with client:
            for made in range(CALLS_PER_MINUTE + 1):
                try:
                    await client.call_tool("notes_search", {"query": str(made)})
                except MCPError as error:
                    return made, error
        raise AssertionError("no call was refused")

    made, error = run(many())

    assert error.code == -32029 and 1 <= error.data["retry_after"] <= 60
    journal = McpCall.objects.filter(token__user=user)
    assert journal.filter(outcome="rate_limited").count() == 1
    admitted = journal.exclude(outcome="rate_limited")
    assert admitted.count() == CALLS_PER_MINUTE  # tools/list and tools/call alike
    assert admitted.filter(method="tools/call").count() == made
    other = issue_token(user, "Another")  # the cap is per token
    assert not run(call(hosts, other, "notes_search", {})).is_error
