"""Events on a chat's Channels group, always sent after commit (SPEC §2.3).

An event carries uuids only; a listener reads what it names through
``agent.conversations`` with a fresh scope.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from typing import Any

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


def attachment_processed(conversation_id: Any, attachment_id: Any) -> None:
    """A file of the chat is ready or failed: the composer reads it again."""
    send_on_commit(topic(conversation_id), ATTACHMENT_PROCESSED, conversation=conversation_id, attachment=attachment_id)


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
    """Send now, whatever the transaction does: only ``send_on_commit`` calls this.

    The send is handed to one long-lived event loop and not waited for: a new
    loop per send would open a new Redis connection each time (SPEC §14).
    """
    layer = get_channel_layer()
    if layer is None:
        return
    future = asyncio.run_coroutine_threadsafe(layer.group_send(group, event), _event_loop())
    future.add_done_callback(lambda done: _log_failure(done, event["type"]))


def _log_failure(done: concurrent.futures.Future[Any], event_type: str) -> None:
    if not done.cancelled() and done.exception() is not None:
        # a lost event is recovered by the tab's resync; it never fails the write
        logger.error("agent: could not send %s (%s)", event_type, type(done.exception()).__name__)


_server_loop: asyncio.AbstractEventLoop | None = None
_own_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def bind_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Send from the ASGI server's own loop, where its sockets' consumers live.

    The in-memory channel layer of the demo is only safe to use from that loop.
    """
    global _server_loop
    _server_loop = loop


def _event_loop() -> asyncio.AbstractEventLoop:
    global _own_loop
    if _server_loop is not None and _server_loop.is_running():
        return _server_loop
    with _loop_lock:
        if _own_loop is None or _own_loop.is_closed():
            _own_loop = asyncio.new_event_loop()
            threading.Thread(target=_own_loop.run_forever, name="agent-events", daemon=True).start()
        return _own_loop
