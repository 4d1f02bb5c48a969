"""The assistant's tools in MCP clients (Claude Desktop, ChatGPT, Cursor, VS Code), with the user's rights.

``issue_token`` and ``revoke_token`` need no MCP SDK; the server (``agent.mcp.server``, the
``django-agent[mcp]`` extra) is imported only by the URLs a site includes when ``AGENT["MCP"]`` is set.
"""

from .tokens import issue_token, revoke_token

__all__ = ["issue_token", "revoke_token"]
