"""What a model is offered of a user's tools: all of them while they fit, else the best-ranked
within the budget (``TOOLS_INLINE_MAX`` tools, ``TOOLS_INLINE_BYTES`` of definitions) plus
``find_tools``, which searches every tool the user may use.

A site with hundreds of tools must not send every definition with every model call: a provider
refuses past about a hundred, and long before that the model chooses worse and every round pays
for what it does not read.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable

from django.utils.module_loading import import_string
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from ..access import Scope, SessionRef
from ..core.conf import agent_settings
from .executor import refused_arguments, visible_for
from .ranking import lexical_rank
from .registry import FIND_TOOLS, Tool, ToolResult

logger = logging.getLogger(__name__)

FOUND_AT_MOST = 20
"""The most tools one ``find_tools`` call may ask for: a page of names, never the whole catalogue."""

ONE_LINE = 200
"""Characters of a found tool's description that ``find_tools`` returns: enough to choose by."""


def rank(scope: Scope, text: str, *, limit: int) -> list[str]:
    """The names of the tools this user may use now that fit ``text`` best, best first.

    ``AGENT["TOOL_RANKER"]`` names a site's own ranker with this signature (embeddings, say);
    what it returns is kept to the user's visible tools, in its order.
    """
    return _ranked(scope, visible_for(scope), text, limit)


def _ranked(scope: Scope, visible: list[Tool], text: str, limit: int) -> list[str]:
    """The site's ranker where it names one, kept to ``visible``; where it fails (logged with its
    traceback), the lexical ranker, so a turn never ends for a ranker's fault."""
    if agent_settings.TOOL_RANKER is not None:
        names = {tool.name for tool in visible}
        try:
            ranked = list(import_string(agent_settings.TOOL_RANKER)(scope, text, limit=limit))
        except Exception:
            logger.exception("AGENT['TOOL_RANKER'] failed; the tools are ranked by their words")
        else:
            return [name for name in dict.fromkeys(ranked) if isinstance(name, str) and name in names][:limit]
    return lexical_rank(visible, text, language=scope.language, limit=limit)


def count_for(user: Any) -> int:
    """How many of the site's tools ``user`` may use, by their rights now, as a session of theirs is
    offered them: for staff's pages, which have no session of the user's."""
    as_user = Scope(actor=SessionRef(session_key="", user_id=user.pk), user=user, language=get_language() or "en")
    return len(visible_for(as_user))


def definitions_bytes(definitions: list[dict[str, Any]]) -> int:
    """The size of tool definitions as a request carries them (JSON, non-ASCII escaped: the most
    any client's encoding of them takes)."""
    return len(json.dumps(definitions)) if definitions else 0


def fit_inline(tools: list[Tool], scope: Scope | None = None) -> bool:
    """Whether these tools' definitions (for ``scope``'s user) all fit one request
    (``TOOLS_INLINE_MAX``, ``TOOLS_INLINE_BYTES``)."""
    most, room = agent_settings.TOOLS_INLINE_MAX, agent_settings.TOOLS_INLINE_BYTES
    return len(tools) <= most and definitions_bytes([t.definition(scope) for t in tools]) <= room


def offer(scope: Scope, text: str, *, keep: Iterable[str] = ()) -> list[Tool]:
    """The tools a model call carries for this user: every visible tool while they fit the budget;
    else the tools in ``keep`` (found or used earlier in the turn), then the best-ranked for
    ``text``, as many as fit, and ``find_tools`` last."""
    visible = visible_for(scope)
    if fit_inline(visible, scope):
        return visible
    most, room = agent_settings.TOOLS_INLINE_MAX, agent_settings.TOOLS_INLINE_BYTES
    finder = find_tools_tool()
    room -= definitions_bytes([finder.definition()])
    by_name = {tool.name: tool for tool in visible}
    chosen: list[Tool] = []
    for name in dict.fromkeys([*keep, *_ranked(scope, visible, text, len(visible))]):
        tool = by_name.get(name)
        if tool is None:
            continue
        size = definitions_bytes([tool.definition(scope)]) + 2  # and the ", " before it
        if size <= room:
            chosen.append(tool)
            room -= size
            if len(chosen) == most - 1:
                break
    return [*chosen, finder]


def find_tools_tool() -> Tool:
    """``find_tools`` as the model sees it, in the active language."""
    return Tool(
        name=FIND_TOOLS,
        kind="read",
        description=_(
            "Search all the tools you may use for those that fit a task, when none you have does. "
            "Each tool found can be called from your next step on."
        ),
        func=lambda ctx, **args: _find(ctx.scope, **args),
        parameters={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                    "description": _("What the tool should do."),
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": FOUND_AT_MOST, "default": 5},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    )


def find_tools(scope: Scope, args: Any) -> ToolResult:
    """Run ``find_tools``: the visible tools that fit the query, best first, as names, titles and
    one-line descriptions."""
    return refused_arguments(find_tools_tool(), args) or ToolResult("ok", _find(scope, **args))


def _find(scope: Scope, query: str, limit: int = 5) -> dict[str, Any]:
    visible = {tool.name: tool for tool in visible_for(scope)}
    found = [visible[name] for name in _ranked(scope, list(visible.values()), query, limit)]
    if not found:
        return {"tools": [], "message": _("No tool fits these words; try others.")}
    return {
        "tools": [{"name": t.name, "title": t.display_title(), "description": _one_line(t.description)} for t in found]
    }


def _one_line(description: str) -> str:
    line = str(description).strip().split("\n", 1)[0]
    return line if len(line) <= ONE_LINE else line[: ONE_LINE - 1].rstrip() + "…"
