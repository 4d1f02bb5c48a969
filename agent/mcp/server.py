"""The MCP server a request is answered by, built on the official SDK (``django-agent[mcp]``).

One ``Server`` per HTTP request, for the actor that request's check let in: its handlers list and
call that user's tools through ``agent.mcp.calls``. Nothing lives between requests in a process, so
any host answers any request. A write waits as a card; a client that can ask its user (elicitation)
is asked within the call, at protocol revision 2026-07-28 by an ``InputRequiredResult`` whose signed
``request_state`` names the card, so the answer may reach any host; an older client gets
``confirmation_required`` with the card's page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.core import signing
from django.utils import translation
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..access import McpRef, Scope
from ..core.conf import agent_settings
from ..tools import registry
from . import calls

RATE_LIMITED_CODE = -32029
"""The JSON-RPC error of a call over the token's per-minute cap; its data says when to retry."""
CONFIRM_KEY = "confirm"
"""The key of the card's elicitation among an ``InputRequiredResult``'s requests."""
STATE_SALT = "agent.mcp.card"


@dataclass(frozen=True)
class Caller:
    """Who this request is for (the scope its check built) and the site's origin as the client called it."""

    scope: Scope
    site: str

    @property
    def actor(self) -> McpRef:
        assert isinstance(self.scope.actor, McpRef)
        return self.scope.actor


def manager_for(caller: Caller) -> StreamableHTTPSessionManager:
    """A stateless, JSON-answering session manager around this caller's server (one per request)."""
    server: Server[Any] = Server(
        "django-agent",
        version=__version__,
        on_list_tools=lambda ctx, params: _list_tools(caller, ctx),
        on_call_tool=lambda ctx, params: _call_tool(caller, ctx, params),
        get_tool_input_schema=_input_schema,
    )
    return StreamableHTTPSessionManager(
        server,
        stateless=True,
        json_response=True,
        max_request_body_size=agent_settings.MCP_MAX_REQUEST_BYTES,
    )


async def _list_tools(caller: Caller, ctx: Any) -> types.ListToolsResult:
    def listed() -> list[tuple[Any, dict[str, Any]]]:
        """Each tool with its definition for this user, as a model on the page is sent it (a
        viewset's parameters are those of the user's own request)."""
        return [(tool, tool.definition(caller.scope)["function"]) for tool in calls.listing(caller.scope)]

    tools = await sync_to_async(_admitted(caller, ctx, "tools/list", "", listed))()
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=tool.name,
                title=tool.display_title(),
                description=function["description"],
                input_schema=function["parameters"],
                annotations=types.ToolAnnotations(read_only_hint=tool.kind == "read"),
            )
            for tool, function in tools
        ]
    )


async def _call_tool(
    caller: Caller, ctx: Any, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    arguments = params.arguments if params.arguments is not None else {}
    client = _client_name(ctx) or caller.actor.token_name

    def run() -> calls.Answer:
        if params.request_state is not None:  # the client's user answered the card we asked about
            return _answered(caller, params)
        return calls.call(caller.scope, params.name, arguments, client=client, site=caller.site)

    answer = await sync_to_async(_admitted(caller, ctx, "tools/call", params.name, run))()
    if answer.confirmation is not None and answer.confirmation.status == "waiting" and _can_ask(ctx):
        return _ask(caller, answer)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=answer.text)],
        structured_content=answer.data,
        is_error=answer.is_error,
    )


def _admitted(caller: Caller, ctx: Any, method: str, tool_name: str, work: Any) -> Any:
    """``work`` journalled and under the token's per-minute cap, in the user's language; run in a thread."""

    def run() -> Any:
        with translation.override(caller.scope.language):
            try:
                entry = calls.admit(caller.scope, method=method, tool_name=tool_name, client=_client_name(ctx))
            except calls.RateLimited as limited:
                message = translation.gettext("Too many calls. Try again in %(seconds)d s.") % {
                    "seconds": limited.retry_after
                }
                raise MCPError(RATE_LIMITED_CODE, message, {"retry_after": limited.retry_after}) from None
            result = work()
            calls.record(entry, _outcome_of(result))
            return result

    return run


def _outcome_of(result: Any) -> str:
    if not isinstance(result, calls.Answer):
        return "ok"
    if result.confirmation is not None and result.confirmation.status == "waiting":
        return "needs_confirmation"
    return str(result.data.get("status") or result.data.get("outcome") or ("error" if result.is_error else "ok"))


def _ask(caller: Caller, answer: calls.Answer) -> types.InputRequiredResult:
    """The card as a question to the client's user; the retry carries their answer and this state."""
    assert answer.confirmation is not None
    state = signing.dumps({"card": str(answer.confirmation.pk), "grant": caller.actor.grant}, salt=STATE_SALT)
    form = types.ElicitRequestFormParams(message=answer.form["message"], requested_schema=answer.form["schema"])
    return types.InputRequiredResult(
        input_requests={CONFIRM_KEY: types.ElicitRequest(params=form)}, request_state=state
    )


def _answered(caller: Caller, params: types.CallToolRequestParams) -> calls.Answer:
    """The client's user answered a card: the state must be this token's (this OAuth client's), of a card still live."""
    try:
        state = signing.loads(params.request_state or "", salt=STATE_SALT, max_age=agent_settings.CONFIRMATION_TTL_S)
    except signing.BadSignature:
        state = None
    if not isinstance(state, dict) or state.get("grant") != caller.actor.grant:
        message = translation.gettext("This confirmation is not yours or has lapsed.")
        return calls.Answer({"error": "invalid_state"}, message, is_error=True)
    response = (params.input_responses or {}).get(CONFIRM_KEY)
    accept = isinstance(response, types.ElicitResult) and response.action == "accept"
    edits = response.content if accept and isinstance(response, types.ElicitResult) else None
    return calls.decide(caller.scope, state["card"], accept=accept, edits=edits, site=caller.site)


def _can_ask(ctx: Any) -> bool:
    """Whether the client can put a form to its user within this call (it said so with this request)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False  # an older client's answer would come back on another request, to whichever host
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _client_name(ctx: Any) -> str:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return str(info.title or info.name) if info is not None else ""


def _input_schema(name: str) -> dict[str, Any] | None:
    tool = registry.get(name)
    return tool.parameters if tool is not None else None
