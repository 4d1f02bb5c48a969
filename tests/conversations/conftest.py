"""Chats of the signed-in user and of someone else."""

from __future__ import annotations

from typing import Any

import pytest

from agent.conversations import append_message
from agent.models import Conversation, Message
from tests.support.factories import ConversationFactory


@pytest.fixture
def others_chat(db: Any) -> Conversation:
    """Someone else's chat, with one message."""
    row = ConversationFactory()
    append_message(row.pk, role=Message.Role.USER, content="someone else's words")
    return Conversation.objects.get(pk=row.pk)
