"""Events on the Channels groups of chats and sessions, sent after commit.

An event carries uuids only; a listener reads what it names through
``agent.conversations`` with a fresh scope. The one exception is a draft of
an answer: never stored, it goes out at once with its text, and a
socket forwards it only under a scope checked within the last second. The
names of every group the assistant uses live here, and so does a socket's
way of leaving them.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import hashlib
import json
import logging
import threading
import time
import uuid
from typing import Any, Callable, Iterable

from channels.layers import get_channel_layer
from django.db import transaction

from .ids import AttachmentId, ConversationId, MessageId, TurnId

logger = logging.getLogger(__name__)

MESSAGE_ADDED = "agent.message_added"
ATTACHMENT_PROCESSED = "agent.attachment_processed"
TURN_CHANGED = "agent.turn_changed"
CONVERSATION_CHANGED = "agent.conversation_changed"
SESSION_ENDED = "agent.session_ended"
ANSWER_DELTA = "agent.answer_delta"
LINE_CHANGED = "agent.line_changed"
KINDS = (
    MESSAGE_ADDED,
    ATTACHMENT_PROCESSED,
    TURN_CHANGED,
    CONVERSATION_CHANGED,
    SESSION_ENDED,
    ANSWER_DELTA,
    LINE_CHANGED,
)
"""Every event a tab's feed (``agent.web.feed``) hears."""

SITE_GROUP = "agent.site"
"""Every open socket of the assistant."""

SEND_ATTEMPTS = 3
LEAVE_GIVE_UP_S = 120.0

losses: collections.Counter[str] = collections.Counter()
"""Events this process could not deliver, by reason; each was logged and its tabs told to resync."""


def topic(conversation_id: ConversationId) -> str:
    """The Channels group of a chat."""
    return f"agent.conv.{conversation_id}"


def session_group(session_key: str) -> str:
    """The Channels group of one session's sockets (a hash, never the key)."""
    digest = hashlib.sha256(f"agent-session:{session_key}".encode()).hexdigest()[:40]
    return f"agent.session.{digest}"


def user_group(user_id: Any) -> str:
    """The Channels group of every socket of one user."""
    return f"agent.user.{user_id}"


def message_added(conversation_id: ConversationId, message_id: MessageId) -> None:
    send_on_commit(topic(conversation_id), MESSAGE_ADDED, conversation=conversation_id, message=message_id)


def attachment_processed(conversation_id: ConversationId, attachment_id: AttachmentId) -> None:
    """A file of the chat is ready or failed: the composer reads it again."""
    send_on_commit(topic(conversation_id), ATTACHMENT_PROCESSED, conversation=conversation_id, attachment=attachment_id)


def turn_changed(conversation_id: ConversationId, turn_id: TurnId, status: str, *, last_seq: int | None = None) -> None:
    """A turn queued, running or ended; an ended turn's event names the ``seq`` of the last message it
    left on the line, so a tab that holds less knows it missed that message's event."""
    fields: dict[str, Any] = {"conversation": conversation_id, "turn": turn_id, "status": status}
    if last_seq is not None:
        fields["last_seq"] = last_seq
    send_on_commit(topic(conversation_id), TURN_CHANGED, **fields)


def answer_delta(conversation_id: ConversationId, turn_id: TurnId, round_number: int, text: str) -> None:
    """The answer of a turn's round so far: never stored, so sent now, not after a commit."""
    event = {
        "type": ANSWER_DELTA,
        "conversation": str(conversation_id),
        "turn": str(turn_id),
        "round": round_number,
        "text": text,
    }
    _send_rollback_unsafe(topic(conversation_id), event)


def call_later(delay: float, callback: Callable[[], None]) -> None:
    """Run ``callback`` on the loop that sends events, ``delay`` seconds from now.

    Its sends then keep their order with every other send of the process.
    """
    loop = _event_loop()
    loop.call_soon_threadsafe(loop.call_later, delay, callback)


def conversation_changed(conversation_id: ConversationId) -> None:
    """A chat was renamed, archived or deleted: open tabs refresh its header."""
    send_on_commit(topic(conversation_id), CONVERSATION_CHANGED, conversation=conversation_id)


def line_changed(conversation_id: ConversationId) -> None:
    """The chat's active line changed (an edit, a regenerate, a switch): open tabs read it again."""
    send_on_commit(topic(conversation_id), LINE_CHANGED, conversation=conversation_id)


def session_ended(group: str, *, final: str | None = None) -> None:
    """Sockets in ``group`` check their session again and close if it is over.

    ``final``, a refusal code, closes them with that code and no check: a
    logout (its request has not flushed the session yet when this is sent),
    an assistant switched off for everyone or for the user. The event's id
    lets one process's sockets of one session share their check.
    """
    send_on_commit(group, SESSION_ENDED, final=final, id=uuid.uuid4().hex)


def count_loss(reason: str) -> int:
    """Count and log an event a tab did not get; the caller makes the tab resync."""
    losses[reason] += 1
    logger.warning("agent: a tab missed events (%s) and resyncs; %d so far in this process", reason, losses[reason])
    return losses[reason]


async def leave(layer: Any, channel_name: str, groups: Iterable[str]) -> None:
    """Take a channel out of its groups, retrying while the layer refuses (Redis down, pool busy), then forget it.

    A channel left behind would keep receiving its chats' events until the
    group expires, so this gives up only after ``LEAVE_GIVE_UP_S``, and says so.
    Whatever still reaches the channel afterwards is dropped, not buffered for
    the life of the process.
    """
    pending = list(dict.fromkeys(groups))
    delay, began = 0.05, time.monotonic()
    try:
        while pending:
            results = await asyncio.gather(
                *(layer.group_discard(group, channel_name) for group in pending), return_exceptions=True
            )
            failed = [exc for exc in results if isinstance(exc, Exception)]
            pending = [group for group, result in zip(pending, results, strict=True) if isinstance(result, Exception)]
            if not pending:
                return
            if time.monotonic() - began > LEAVE_GIVE_UP_S:
                losses["groups_left_behind"] += 1
                logger.error(
                    "agent: a closed socket stays in %d groups until they expire (%s)",
                    len(pending),
                    type(failed[0]).__name__,
                )
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
    finally:
        forget_channel(layer, channel_name)


def forget_channel(layer: Any, channel_name: str) -> None:
    """Drop what the process buffers for a channel whose socket ended (the app's own layer; others keep theirs)."""
    forget = getattr(layer, "forget_channel", None)
    if forget is not None:
        forget(channel_name)
        return
    for buffers in (getattr(layer, "receive_buffer", None), getattr(layer, "channels", None)):
        if isinstance(buffers, dict):
            buffers.pop(channel_name, None)


def send_on_commit(group: str, event_type: str, **payload: Any) -> None:
    """Queue one event for after the current transaction commits.

    The payload goes through JSON now, so a bad payload fails where it was built.
    """
    event = json.loads(json.dumps({"type": event_type, **payload}, default=str))
    transaction.on_commit(lambda: _send_rollback_unsafe(group, event))


def _send_rollback_unsafe(group: str, event: dict[str, Any]) -> None:
    """Send now, whatever the transaction does: only ``send_on_commit`` calls this.

    The send is handed to one long-lived event loop and not waited for: a new
    loop per send would open a new Redis connection each time.
    """
    layer = get_channel_layer()
    if layer is None:
        return
    loop = _event_loop()
    future = asyncio.run_coroutine_threadsafe(_send(layer, group, event), loop)
    _in_flight[future] = loop
    future.add_done_callback(lambda done: _in_flight.pop(done, None))
    future.add_done_callback(lambda done: _log_failure(done, event["type"]))


_in_flight: dict[concurrent.futures.Future[Any], asyncio.AbstractEventLoop] = {}
"""Sends handed over and not yet done, with the loop each runs on."""


def flush(timeout: float = 5.0) -> bool:
    """Wait until every event this process has handed over so far is sent, or given up on; True
    when none is left within ``timeout`` seconds.

    Sends are not waited for where they are made. A process about to exit waits here, since its
    sending thread dies with it (a worker shutting down, and any process at exit); so does a caller
    that must know an event has reached the layer before it goes on.
    """
    handed = list(_in_flight.items())
    if any(loop is _running_loop() for _future, loop in handed):
        raise RuntimeError("flush() would wait on the loop that sends: call it from another thread")
    pending = [future for future, loop in handed if loop.is_running()]  # a stopped loop sends nothing more
    _done, left = concurrent.futures.wait(pending, timeout=timeout)
    return not left and len(pending) == len(handed)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


atexit.register(flush)  # the sending thread is a daemon: what it still holds goes out before the process ends


_in_order: dict[tuple[asyncio.AbstractEventLoop, str], tuple[asyncio.Lock, int]] = {}


async def _send(layer: Any, group: str, event: dict[str, Any]) -> None:
    """One group send, after the process's earlier sends to the group, tried again briefly when refused.

    In order, because a tab that sees a chat's message 5 before its message 4
    must resync. Refused: a Redis restart, a pool with no free connection.
    """
    key = (asyncio.get_running_loop(), group)
    lock, users = _in_order.get(key) or (asyncio.Lock(), 0)
    _in_order[key] = (lock, users + 1)
    try:
        async with lock:
            for attempt in range(SEND_ATTEMPTS):
                try:
                    await layer.group_send(group, event)
                    return
                except Exception:
                    if attempt == SEND_ATTEMPTS - 1:
                        raise
                    await asyncio.sleep(0.1 * 3**attempt)
    finally:
        lock, users = _in_order[key]
        if users == 1:
            del _in_order[key]
        else:
            _in_order[key] = (lock, users - 1)


def _log_failure(done: concurrent.futures.Future[Any], event_type: str) -> None:
    if not done.cancelled() and done.exception() is not None:
        # A lost event never fails the write. Its tabs lost their layer too and resync when they reconnect.
        losses["send_failed"] += 1
        logger.error(
            "agent: could not send %s (%s); %d such in this process",
            event_type,
            type(done.exception()).__name__,
            losses["send_failed"],
        )


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
