"""Run a tool as the session's user: reads run, writes become cards (SPEC §5)."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Collection, Literal

from ..access import Scope
from ..conf import agent_settings
from .registry import Tool, registry

logger = logging.getLogger(__name__)

Outcome = Literal["ok", "error", "denied", "invalid_arguments", "needs_confirmation"]


@dataclass(frozen=True)
class ToolContext:
    """What a tool gets besides its arguments."""

    user: Any
    scope: Scope
    conversation: Any
    turn_ref: Any
    language: str


@dataclass(frozen=True)
class ToolResult:
    outcome: Outcome
    result: Any
    confirmation: Any = None


def visible_for(scope: Scope, allow: Collection[str] | Literal["all"] = "all") -> list[Tool]:
    """The tools this session may use now: reads it holds the permission for,
    and writes of modules that let a session write."""
    write_modules = set(agent_settings.SESSION_WRITE_MODULES)
    visible = []
    for tool in registry.all():
        if allow != "all" and tool.name not in allow:
            continue
        if tool.permission and not scope.has_perm(tool.permission):
            continue
        if tool.kind == "write" and tool.module not in write_modules:
            continue
        visible.append(tool)
    return visible


def may_write(scope: Scope, tool: Tool) -> bool:
    """Whether this session may still apply ``tool``'s change (checked at the click)."""
    return (
        tool.kind == "write"
        and tool.module in agent_settings.SESSION_WRITE_MODULES
        and (not tool.permission or scope.has_perm(tool.permission))
    )


def execute_as(
    scope: Scope,
    name: str,
    args: Any,
    *,
    allow: Collection[str] | Literal["all"] = "all",
    via: str,
    chat: Any,
    call_id: str,
    turn: Any = None,
) -> ToolResult:
    """Check visibility and arguments, then run a read or turn a write into a card."""
    tool = next((t for t in visible_for(scope, allow) if t.name == name), None)
    if tool is None:
        return ToolResult("denied", {"error": "not_available", "message": "This tool is not available."})
    if not isinstance(args, dict):
        return ToolResult("invalid_arguments", {"error": "invalid_arguments", "details": ["arguments must be an object"]})
    problems = sorted(tool.validator.iter_errors(args), key=lambda e: list(e.path))
    if problems:
        details = [f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in problems[:5]]
        return ToolResult("invalid_arguments", {"error": "invalid_arguments", "details": details})
    ctx = ToolContext(scope.user, scope, chat, getattr(turn, "pk", None), scope.language)
    if tool.kind == "write":
        return _propose(tool, ctx, args, chat=chat, call_id=call_id, turn=turn)
    try:
        return ToolResult("ok", tool.func(ctx, **args))
    except Exception as error:
        logger.exception("agent tool %s failed via %s", tool.name, via)
        return ToolResult("error", {"error": type(error).__name__})


def _propose(tool: Tool, ctx: ToolContext, args: dict[str, Any], *, chat: Any, call_id: str, turn: Any) -> ToolResult:
    from .. import confirmations

    if confirmations.waiting_duplicate(chat, tool.name, args):
        return ToolResult("denied", {"error": "duplicate", "message": "Already waiting for confirmation."})
    try:
        preview = tool.preview(ctx, **args)  # type: ignore[misc]
        fingerprint = compute_fingerprint(tool, ctx, args, preview)
    except Exception as error:
        logger.exception("agent tool %s: preview failed", tool.name)
        return ToolResult("error", {"error": type(error).__name__})
    card = confirmations.create_card(
        ctx.user, chat, turn, tool_name=tool.name, call_id=call_id, arguments=args,
        preview=preview, fingerprint=fingerprint,
    )
    return ToolResult(
        "needs_confirmation", {"status": "confirmation_required", "confirmation_id": str(card.pk)}, confirmation=card
    )


def compute_fingerprint(tool: Tool, ctx: ToolContext, args: dict[str, Any], preview: Any = None) -> str:
    """A digest of the data the write would change: the tool's own, else of its preview."""
    if tool.fingerprint is not None:
        return str(tool.fingerprint(ctx, **args))
    if preview is None:
        preview = tool.preview(ctx, **args)  # type: ignore[misc]
    canonical = json.dumps(preview, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
