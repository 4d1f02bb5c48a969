"""Schema only: the rules live in the parts that use these models."""

from .ai import AIRequest, Endpoint, OffPurposeFlag
from .attachments import Attachment
from .confirmations import Confirmation
from .conversations import Conversation, Message
from .mcp import McpCall, McpToken
from .quotas import QuotaUse
from .settings import UNREAD, AgentSettings, UserSettings
from .telegram import (
    TelegramBot,
    TelegramButtons,
    TelegramDraft,
    TelegramLink,
    TelegramLinkToken,
    TelegramTurn,
    TelegramUpdate,
)
from .turns import Lock, Turn

__all__ = [
    "UNREAD",
    "AIRequest",
    "AgentSettings",
    "Attachment",
    "Confirmation",
    "Conversation",
    "Endpoint",
    "Lock",
    "McpCall",
    "McpToken",
    "Message",
    "OffPurposeFlag",
    "QuotaUse",
    "TelegramBot",
    "TelegramButtons",
    "TelegramDraft",
    "TelegramLink",
    "TelegramLinkToken",
    "TelegramTurn",
    "TelegramUpdate",
    "Turn",
    "UserSettings",
]
