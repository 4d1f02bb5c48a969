"""The site's tools, declared with ``@agent_tool`` and run as the session's user."""

from .catalogue import rank
from .executor import execute_as, visible_for
from .registry import Tool, ToolContext, ToolResult, agent_tool, checked_once, registry

__all__ = [
    "Tool",
    "ToolContext",
    "ToolResult",
    "agent_tool",
    "checked_once",
    "execute_as",
    "rank",
    "registry",
    "visible_for",
]
