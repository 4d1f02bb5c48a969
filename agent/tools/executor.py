"""Run a tool as the session's user: reads run, writes become cards."""

from __future__ import annotations

import json
import logging
from typing import Any, Collection, Literal

from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from .. import confirmations
from ..access import Scope
from ..core.conf import agent_settings
from .definitions import enum_refusal
from .registry import Refused, Tool, ToolContext, ToolResult, invalid_arguments, registry

logger = logging.getLogger(__name__)


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
        if not tool.offered_to(scope):
            continue
        visible.append(tool)
    return visible


def parse_arguments(text: str) -> Any:
    """A model's arguments text as JSON (empty: no arguments).

    ``Refused("invalid_arguments")`` when it is longer than ``TOOL_RESULT_CHARS`` (never parsed),
    not JSON, or nested past what the parser follows; lesser nesting is ``refused_arguments``'s to judge."""
    if len(text) > agent_settings.TOOL_RESULT_CHARS:
        raise Refused("invalid_arguments", _too_long())
    try:
        return json.loads(text) if text.strip() else {}
    except RecursionError:  # nested deeper than the parser goes, far past the depth allowed
        raise Refused("invalid_arguments", _too_deep()) from None
    except ValueError:
        raise Refused(
            "invalid_arguments", {"error": "invalid_arguments", "details": ["arguments are not JSON"]}
        ) from None


def oversized_arguments(args: Any) -> dict[str, Any] | None:
    """What the model is told about arguments no tool is handed, or None: nested deeper than
    ``MAX_TOOL_ARGUMENT_DEPTH`` levels, or longer as JSON than ``TOOL_RESULT_CHARS``.

    Measured without recursion, so no nesting can exhaust the stack; the depth first, so the
    length is only measured on arguments that are safe to serialise."""
    limit = agent_settings.MAX_TOOL_ARGUMENT_DEPTH
    pending: list[tuple[Any, int]] = [(args, 1)]
    while pending:
        value, depth = pending.pop()
        if not isinstance(value, (dict, list)):
            continue
        if depth > limit:
            return _too_deep()
        pending.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    if len(json.dumps(args, ensure_ascii=False, default=str)) > agent_settings.TOOL_RESULT_CHARS:
        return _too_long()
    return None


def _too_deep() -> dict[str, Any]:
    message = _("arguments nest deeper than %(depth)d levels") % {"depth": agent_settings.MAX_TOOL_ARGUMENT_DEPTH}
    return {"error": "invalid_arguments", "details": [message]}


def _too_long() -> dict[str, Any]:
    message = _("arguments are longer than %(chars)d characters") % {"chars": agent_settings.TOOL_RESULT_CHARS}
    return {"error": "invalid_arguments", "details": [message]}


def refused_arguments(tool: Tool, args: Any, scope: Scope | None = None) -> ToolResult | None:
    """The ``invalid_arguments`` result for arguments ``tool``'s schema (for ``scope``'s user) refuses,
    or that no tool is handed (nested too deep, too long: before the schema reads them); None when it
    takes them."""
    if not isinstance(args, dict):
        return ToolResult(
            "invalid_arguments", {"error": "invalid_arguments", "details": ["arguments must be an object"]}
        )
    oversized = oversized_arguments(args)
    if oversized is not None:
        return ToolResult("invalid_arguments", oversized)
    problems = sorted(tool.validator_for(scope).iter_errors(args), key=lambda e: list(e.path))
    if problems:
        details = [f"{'/'.join(map(str, e.path)) or '(root)'}: {_problem(e)}" for e in problems[:5]]
        return ToolResult("invalid_arguments", {"error": "invalid_arguments", "details": details})
    return None


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
    """Check visibility and arguments, then run a read or turn a write into a card.

    Arguments nested too deep or too long are ``invalid_arguments`` before anything reads them:
    no such call runs, nor makes a card."""
    tool = next((t for t in visible_for(scope, allow) if t.name == name), None)
    if tool is None:
        return ToolResult("denied", {"error": "not_available", "message": _("This tool is not available.")})
    wrong = refused_arguments(tool, args, scope)
    if wrong is not None:
        return wrong
    ctx = ToolContext(scope.user, scope, chat, getattr(turn, "pk", None), scope.language)
    try:
        if tool.kind == "write":  # checked, with its preview, in a transaction that is undone
            return confirmations.propose(tool, ctx, args, call_id=call_id, turn=turn)
        if tool.validate is not None:
            tool.validate(ctx, **args)
        return ToolResult("ok", tool.func(ctx, **args))
    except ValidationError as invalid:
        return ToolResult("invalid_arguments", invalid_arguments(invalid))
    except Refused as refused:
        return ToolResult(refused.outcome, refused.result)
    except SoftTimeLimitExceeded:  # the turn's deadline, not the tool's failure
        raise
    except Exception as error:
        logger.exception("agent tool %s failed via %s", tool.name, via)
        return ToolResult("error", {"error": type(error).__name__})


def _problem(error: Any) -> str:
    """A schema's refusal as the model is told it: an enum's allowed values named at most ``TOOL_ENUM_MAX``."""
    if error.validator == "enum" and isinstance(error.validator_value, list):
        return enum_refusal(error.instance, error.validator_value)
    return str(error.message)
