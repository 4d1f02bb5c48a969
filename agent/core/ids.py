"""The ids a door takes: a row's UUID, or its text as a URL, a frame, a task or a button carried it.

Each door parses what it is given (a malformed id is "not found", as a missing row is), so a caller
passes either. The names say which row an id is of.
"""

from __future__ import annotations

from typing import TypeAlias
from uuid import UUID

ConversationId: TypeAlias = UUID | str
MessageId: TypeAlias = UUID | str
TurnId: TypeAlias = UUID | str
ConfirmationId: TypeAlias = UUID | str
AttachmentId: TypeAlias = UUID | str
