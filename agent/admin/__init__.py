"""Staff pages, for users with ``agent.manage_agent``.

List pages never show a message's text, a tool's arguments or results, a
session key or an API key; message text needs ``agent.view_chat_content``.
Each module registers the pages of one part: where chats go (``endpoints``),
the chats themselves (``chats``), the journal of model calls with its
reports (``journal``, drawing on ``reports``), the Telegram links (``telegram``) and
the MCP tokens with their calls (``mcp``).
"""

from . import chats, endpoints, journal, mcp, telegram  # noqa: F401  (registering is importing)
