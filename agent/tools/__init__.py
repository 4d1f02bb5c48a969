"""The site's tools, declared with ``@agent_tool`` and run as the session's user."""

from .catalogue import rank
from .executor import execute_as, parse_arguments, visible_for
from .registry import Refused, Tool, ToolContext, ToolResult, agent_tool, checked_once, registry

__all__ = [
    "Refused",
    "Tool",
    "ToolContext",
    "ToolResult",
    "agent_tool",
    "checked_once",
    "execute_as",
    "parse_arguments",
    "rank",
    "registry",
    "visible_for",
]
