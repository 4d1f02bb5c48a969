"""What an MCP call does with the user's tools, without the protocol: the list, a read, a write that
becomes a card, and the card decided from the client. ``agent.mcp.server`` speaks MCP around it.

Every function takes the scope the caller's check built for this very request (the token, the user,
``agent.use_agent``, ``agent.use_mcp`` and the tools' permissions, read in one statement).
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from .. import confirmations, notices
from ..access import McpRef, Scope
from ..conversations.store import append_message
from ..core import errors
from ..core.conf import agent_settings
from ..core.ids import ConfirmationId
from ..limits import quotas
from ..models import Confirmation, Conversation, McpCall, McpToken, Message
from ..step_labels import confirmation_fields, tool_title
from ..tools import catalogue, execute_as, registry, visible_for
from ..tools.registry import FIND_TOOLS, Tool

CLIENT_CHARS = 60
"""How much of the name a client gives itself goes into its chat's title."""


@dataclass(frozen=True)
class Answer:
    """A call's answer: its data (``structuredContent``), its text, and whether it is an error."""

    data: dict[str, Any]
    text: str
    is_error: bool = False
    confirmation: Confirmation | None = None
    form: dict[str, Any] = field(default_factory=dict)  # a waiting card's requested schema, to ask the client


class RateLimited(Exception):
    """The token made ``MCP_CALLS_PER_MINUTE`` calls in the last minute; ``retry_after`` seconds until a slot frees."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


# -- the journal and the cap ---------------------------------------------------------------------


def admit(scope: Scope, *, method: str, tool_name: str = "", client: str = "") -> McpCall:
    """Journal a call of the scope's token, unless the token has had its calls this minute
    (``RateLimited``, journalled too). The token's row lock makes its calls take turns, so two at
    once cannot both take the last slot; counted in the database, so every host sees the same.

    An OAuth client's calls for a user count together, whichever of its access tokens made them
    (a refresh makes a new one); the user's row is the lock they take turns on."""
    actor = scope.actor
    assert isinstance(actor, McpRef) and actor.token_id is not None
    now = timezone.now()
    credential = {"oauth_application_id": actor.application_id} if actor.oauth else {"token_id": actor.token_id}
    entry = {
        **credential,
        "token_name": actor.token_name[:255],
        "user_id": scope.user_id,
        "method": method[:64],
        "tool_name": tool_name[:64],
        "client": client[:200],
    }
    with transaction.atomic():
        if actor.oauth:
            quotas.hold(scope.user_id)
            calls = McpCall.objects.filter(oauth_application_id=actor.application_id, user_id=scope.user_id)
        else:
            list(McpToken.objects.select_for_update().filter(pk=actor.token_id).values_list("pk"))
            calls = McpCall.objects.filter(token_id=actor.token_id)
        recent = calls.filter(at__gt=now - timedelta(minutes=1)).exclude(outcome=RATE_LIMITED)
        cap = agent_settings.MCP_CALLS_PER_MINUTE
        if recent.count() < cap:
            if not actor.oauth:
                McpToken.objects.filter(pk=actor.token_id).update(last_used_at=now)
            return McpCall.objects.create(**entry)
        oldest = recent.order_by("at").values_list("at", flat=True).first() or now
    McpCall.objects.create(**entry, outcome=RATE_LIMITED)
    raise RateLimited(max(1, math.ceil((oldest + timedelta(minutes=1) - now).total_seconds())))


RATE_LIMITED = "rate_limited"


def record(call: McpCall, outcome: str) -> None:
    McpCall.objects.filter(pk=call.pk).update(outcome=outcome[:32])


# -- tools ---------------------------------------------------------------------------------------


def listing(scope: Scope) -> list[Tool]:
    """The tools the user may use now, as on the page; with ``find_tools`` too where they are too many
    to fit one model request, so a client's model can search them as the page's does."""
    visible = visible_for(scope)
    return visible if catalogue.fit_inline(visible, scope) else [*visible, catalogue.find_tools_tool()]


def call(scope: Scope, name: str, arguments: Any, *, client: str, site: str) -> Answer:
    """Run a read as the page does; make a write a waiting card in the client's chat.

    ``site`` is the scheme and host the client called (for the card's link).
    """
    tool = registry.get(name)
    if tool is not None and tool.kind == "write" and visible_for(scope, allow=[name]):
        return _propose(scope, tool, arguments, client=client, site=site)
    if name == FIND_TOOLS and not catalogue.fit_inline(visible_for(scope), scope):
        found = catalogue.find_tools(scope, arguments)
        return _answer(found.outcome, found.result)
    result = execute_as(scope, name, arguments, via="mcp", chat=None, call_id=_call_id())
    return _answer(result.outcome, result.result)


def _propose(scope: Scope, tool: Tool, arguments: Any, *, client: str, site: str) -> Answer:
    """The card and the tool message that shows it on the page, stored together in the client's chat."""
    call_id = _call_id()
    with transaction.atomic():
        conversation = client_conversation(scope, client)
        result = execute_as(scope, tool.name, arguments, via="mcp", chat=conversation, call_id=call_id)
        if result.confirmation is None:
            transaction.set_rollback(True)  # nothing to confirm: no tool message either
            return _answer(result.outcome, result.result)
        append_message(
            conversation.pk,
            role=Message.Role.TOOL,
            tool_name=tool.name,
            tool_call_id=call_id,
            tool_outcome=result.outcome,
            tool_result=result.result,
            confirmation=result.confirmation,
        )
    return waiting(result.confirmation, site)


def waiting(confirmation: Confirmation, site: str) -> Answer:
    """A card that waits for the user: its id, its page, and the form a client may ask them with."""
    url = site + reverse("agent:chat_open", args=[confirmation.conversation_id])
    title = tool_title(confirmation.tool_name)
    data = {"status": "confirmation_required", "confirmation_id": str(confirmation.pk), "url": url}
    text = _("%(tool)s waits for your confirmation: %(url)s") % {"tool": title, "url": url}
    return Answer(data, text, confirmation=confirmation, form=form_of(confirmation))


def client_conversation(scope: Scope, client: str) -> Conversation:
    """The user's chat named for the client ("<client> (MCP)"): the latest live one, else a new one."""
    title = _("%(client)s (MCP)") % {"client": " ".join(client.split())[:CLIENT_CHARS] or _("MCP client")}
    conversation = (
        Conversation.objects.alive().filter(user_id=scope.user_id, title=title).order_by("-created_at").first()
    )
    if conversation is None:
        conversation = Conversation.objects.create(user=scope.user, title=title, last_message_at=timezone.now())
    return conversation


def form_of(confirmation: Confirmation) -> dict[str, Any]:
    """The card as an elicitation: a message with what the write would do, and its editable fields as
    the flat schema elicitation takes (each field's current value as its default)."""
    rows = confirmation_fields(confirmation.tool_name, confirmation.preview)
    shown = "\n".join(f"{row['label']}: {row['value']}" if row.get("label") else str(row["value"]) for row in rows)
    message = _("Confirm %(tool)s?") % {"tool": tool_title(confirmation.tool_name)}
    properties = {name: _schema_of(spec) for name, spec in confirmations.editable_fields(confirmation.preview).items()}
    schema = {"type": "object", "properties": properties}
    return {"message": f"{message}\n\n{shown}" if shown else message, "schema": schema}


_KINDS = {"integer": "integer", "number": "number", "boolean": "boolean"}
_FORMATS = {"date": "date", "datetime": "date-time"}


def _schema_of(spec: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": _KINDS.get(spec["type"], "string"),
        "title": str(spec.get("label") or spec["name"]),
    }
    if spec["type"] in _FORMATS:
        schema["format"] = _FORMATS[spec["type"]]
    if spec["type"] == "choice" and isinstance(spec.get("choices"), list):
        # a card lists its choices as [value, label] pairs; elicitation offers the values, titled
        values = [choice for choice in spec["choices"] if isinstance(choice, (list, tuple)) and len(choice) == 2]
        if values:
            schema["oneOf"] = [{"const": str(value), "title": str(label)} for value, label in values]
    value = spec.get("value")
    if isinstance(value, (str, int, float, bool)):
        schema["default"] = value
    return schema


def decide(
    scope: Scope, confirmation_id: ConfirmationId, *, accept: bool, edits: dict[str, Any] | None, site: str
) -> Answer:
    """The user's answer to a card, given in the client: accept (with their edits) confirms it, as
    the page's Confirm does, with every check at this moment; anything else cancels it. Invalid edits
    leave the card waiting: the answer asks again, with the fields' messages."""
    try:
        if accept:
            confirmation = confirmations.confirm(
                scope.actor, confirmation_id, impersonated=False, edits=_offered(confirmation_id, edits)
            )
        else:
            confirmation = confirmations.cancel(scope.actor, confirmation_id, impersonated=False)
    except ValidationError as invalid:
        confirmation = Confirmation.objects.get(pk=confirmation_id)
        again = waiting(confirmation, site)
        problems = "\n".join(f"{name}: {' '.join(messages)}" for name, messages in invalid.message_dict.items())
        form = {**again.form, "message": f"{again.form['message']}\n\n{problems}"}
        return Answer(again.data, again.text, confirmation=confirmation, form=form)
    except errors.Refusal as refusal:
        return Answer({"error": refusal.code}, refusal.message, is_error=True)
    code = f"confirmation_{confirmation.status}"
    text = notices.text(code, {"tool": tool_title(confirmation.tool_name)})
    failed = confirmation.status in (Confirmation.Status.FAILED, Confirmation.Status.STALE, Confirmation.Status.EXPIRED)
    return Answer({"status": confirmation.status, "confirmation_id": str(confirmation.pk)}, text, is_error=failed)


def _offered(confirmation_id: ConfirmationId, edits: dict[str, Any] | None) -> dict[str, Any] | None:
    """The client's values of the fields the card let it edit (the form asked for no others)."""
    if not edits:
        return None
    preview = Confirmation.objects.filter(pk=confirmation_id).values_list("preview", flat=True).first()
    offered = confirmations.editable_fields(preview)
    return {name: value for name, value in edits.items() if name in offered} or None


def _answer(outcome: str, result: Any) -> Answer:
    """A read's result or a refusal, as the client gets it: errors in the user's language."""
    if outcome == "ok":
        data = result if isinstance(result, dict) else {"result": result}
        return Answer(data, json.dumps(result, ensure_ascii=False, default=str))
    data = result if isinstance(result, dict) else {"error": outcome}
    message = data.get("message") if isinstance(data.get("message"), str) else None
    if outcome == "invalid_arguments":
        details = data.get("details")
        listed = "; ".join(map(str, details)) if isinstance(details, list) else ""
        message = _("The arguments do not fit the tool.") + (f" {listed}" if listed else "")
    elif outcome == "error":
        message = _("The tool failed. Nothing was changed.")
    return Answer({"outcome": outcome, **data}, message or _("This tool is not available."), is_error=True)


def _call_id() -> str:
    return f"mcp_{uuid.uuid4().hex}"
