"""Events on a chat's Channels group, always sent after commit (SPEC §2.3).

An event carries uuids only; a listener reads what it names through
``agent.conversations`` with a fresh scope.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

MESSAGE_ADDED = "agent.message_added"
ATTACHMENT_PROCESSED = "agent.attachment_processed"
TURN_CHANGED = "agent.turn_changed"
CONVERSATION_CHANGED = "agent.conversation_changed"
SESSION_ENDED = "agent.session_ended"


def topic(conversation_id: Any) -> str:
    """The Channels group of a chat."""
    return f"agent.conv.{conversation_id}"


def message_added(conversation_id: Any, message_id: Any) -> None:
    send_on_commit(topic(conversation_id), MESSAGE_ADDED, conversation=conversation_id, message=message_id)


def turn_changed(conversation_id: Any, turn_id: Any, status: str) -> None:
    send_on_commit(topic(conversation_id), TURN_CHANGED, conversation=conversation_id, turn=turn_id, status=status)


def conversation_changed(conversation_id: Any) -> None:
    """A chat was renamed, archived or deleted: open tabs refresh its header."""
    send_on_commit(topic(conversation_id), CONVERSATION_CHANGED, conversation=conversation_id)


def session_ended(group: str, *, final: bool = False) -> None:
    """Sockets in ``group`` check their session again and close if it is over.

    ``final`` (a logout) closes them without a check: the logout's own request
    has not flushed the session yet when this is sent.
    """
    send_on_commit(group, SESSION_ENDED, final=final)


def send_on_commit(group: str, event_type: str, **payload: Any) -> None:
    """Queue one event for after the current transaction commits.

    The payload goes through JSON now, so a bad payload fails where it was built.
    """
    event = json.loads(json.dumps({"type": event_type, **payload}, default=str))
    transaction.on_commit(lambda: _send_rollback_unsafe(group, event))


def _send_rollback_unsafe(group: str, event: dict[str, Any]) -> None:
    """Send now, whatever the transaction does: only ``send_on_commit`` calls this."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, event)
    except Exception:  # a lost event is recovered by the tab's resync; never fail the write
        logger.exception("agent: could not send %s", event["type"])
