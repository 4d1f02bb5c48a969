"""The chat page's websocket: its life, its frames' checks, and the layer events it delivers.

``AgentConsumer`` reads each frame (size, rate, JSON) and answers it through
its door (``frames.FrameDoors``: a part's public function per frame type) with
the one error contract; it keeps which chats its tab shows and tells the tab to
read again what it missed; it delivers the layer's events for those chats; and
it re-checks the session. Who may open it is the handshake's (``handshake``).

Channels reads the session once, at connect, so nothing read then is trusted
afterwards: each frame is checked with a fresh scope, each event with a scope
checked at most ``SCOPE_FRESH_S`` ago, and an idle socket checks again at
least every ``SOCKET_RECHECK_S``. One process's sockets share that work: one
check per session and one read of a message per user, however many tabs
are open, and what they ask of the database at one moment goes in one call.
A socket takes its events off the layer at once and works through them in
its own task, so a slow read never stops the process from reading Redis.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import deque
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.core.exceptions import ValidationError

from .. import conversations, events
from ..access import Scope, SessionRef, is_impersonated, language_for
from ..conf import agent_settings
from ..errors import SESSION_REFUSALS, BadFrame, NotFound, Refusal, SessionGone, error_body, invalid_body, refusal_named
from .delivery import SCOPE_FRESH_S, SharedReads, run_detached, same_draft
from .frames import FrameDoors
from .handshake import origin_allowed, request_language
from .rendering import draft_html

logger = logging.getLogger(__name__)

WEBSOCKET_PATH = "ws/agent/"
"""Where the chat page's socket connects: ``agent.routing`` routes it here, the page reads it."""

CLOSE_SESSION_ENDED = 4401
CLOSE_TOO_LARGE = 4413
CLOSE_TOO_FAST = 4429
CLOSE_INTERNAL_ERROR = 1011
CLOSE_CODES = {
    "session_ended": CLOSE_SESSION_ENDED,
    "too_large": CLOSE_TOO_LARGE,
    "too_fast": CLOSE_TOO_FAST,
    "internal_error": CLOSE_INTERNAL_ERROR,
}
"""The close codes by name, as the page reads them."""

FELL_BEHIND = "agent.fell_behind"
"""Put in a socket's own queue, never sent: the queue overflowed and lost what was in it."""

SUBSCRIPTION_FRAMES = {"subscribe", "unsubscribe"}


class AgentConsumer(FrameDoors, AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        if not origin_allowed(self.scope):
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        events.bind_server_loop(asyncio.get_running_loop())
        self.ref = SessionRef.from_scope(self.scope)
        self.impersonated = is_impersonated(self.scope)
        self.shared = SharedReads.of_running_loop()
        self.subscribed: dict[str, int | None] = {}  # chat → seq of the last message the tab has, if known
        self.resyncing: set[str] = set()  # chats whose tab was told to resync and has not subscribed again
        self.joined: set[str] = set()  # every group this channel joined: all are left when the socket ends
        self.inbox: deque[dict[str, Any]] = deque()  # layer events this socket has yet to deliver
        self.inbox_ready = asyncio.Event()
        self.delivering = asyncio.Lock()  # an event's delivery and a (un)subscribe frame take turns
        self.frame_times: deque[float] = deque()
        self.request_language = request_language(self.scope)
        self.language = self.request_language or settings.LANGUAGE_CODE
        self.ended = False
        self.checked_after = 0.0  # a check this socket relies on began after this (a revocation it heard of)
        self.tasks: list[asyncio.Task[None]] = []
        await self.accept()
        if not await self._allowed(since=time.monotonic()):
            return
        await self._join(self.ref.group, events.user_group(self.ref.user_id), events.SITE_GROUP)
        self.tasks = [asyncio.ensure_future(self._deliver()), asyncio.ensure_future(self._watch())]
        await self.send_json({"type": "ready"})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The socket's whole life; its groups are left however it ends, the channel layer failing included."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            for task in getattr(self, "tasks", []):
                task.cancel()
            joined = getattr(self, "joined", None)
            if joined:
                # Shielded: when the server stops waiting for this socket, its groups are still left.
                await asyncio.shield(run_detached(events.leave(self.channel_layer, self.channel_name, joined)))

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, but layer events go to this socket's own queue and nothing waits for the database.

        Channels pulls a process's events from Redis only while some socket
        waits for one, so a socket that read the database before taking its
        next event would hold up every socket of the process. A revocation does
        not queue: it is handled at once. Channels' database hop before every
        message is left out: every read here tidies the thread's connection itself.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        if message["type"].startswith("agent.") and message["type"] != events.SESSION_ENDED:
            self._enqueue(message)
            return
        await handler(message)

    def _drop_drafts(self, conversation_id: str) -> None:
        self.inbox = deque(
            e for e in self.inbox if e["type"] != events.ANSWER_DELTA or e["conversation"] != conversation_id
        )

    def _enqueue(self, event: dict[str, Any]) -> None:
        if event["type"] == events.ANSWER_DELTA and self.inbox and same_draft(self.inbox[-1], event):
            self.inbox[-1] = event  # a draft not yet delivered: the newer text replaces it
            return
        if len(self.inbox) >= agent_settings.SOCKET_BACKLOG:
            self.inbox.clear()  # what the tab missed, it reads again on resync
            self.inbox.append({"type": FELL_BEHIND})
        self.inbox.append(event)
        self.inbox_ready.set()

    async def _deliver(self) -> None:
        """Work through this socket's events in order; a failure ends the socket as one in dispatch would."""
        try:
            while not self.ended:
                if not self.inbox:
                    self.inbox_ready.clear()
                    await self.inbox_ready.wait()
                    continue
                event = self.inbox.popleft()
                async with self.delivering:
                    if not self.ended:
                        await getattr(self, get_handler_name(event))(event)
        except Exception:
            logger.exception("agent: a socket could not deliver an event")
            await self.close(code=CLOSE_INTERNAL_ERROR)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if bytes_data is not None or text_data is None or _utf8_length(text_data) > agent_settings.WS_MAX_FRAME_BYTES:
            await self.close(code=CLOSE_TOO_LARGE)
            return
        if not self._within_rate():
            await self.close(code=CLOSE_TOO_FAST)
            return
        try:
            frame = json.loads(text_data)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            frame = None
        if not isinstance(frame, dict):
            await self.send_json({"type": "error", **error_body(BadFrame())})
            return
        await self.receive_json(frame)

    def _within_rate(self) -> bool:
        now = time.monotonic()
        while self.frame_times and now - self.frame_times[0] > 10:
            self.frame_times.popleft()
        self.frame_times.append(now)
        return len(self.frame_times) <= agent_settings.WS_FRAMES_PER_10S

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        handler = self.FRAMES.get(content.get("type"))  # type: ignore[arg-type]
        if handler is None:
            await self.send_json({"type": "error", **error_body(BadFrame()), "ref": content.get("ref")})
            return
        try:
            if content["type"] in SUBSCRIPTION_FRAMES:
                async with self.delivering:
                    reply = await handler(self, content)
            else:
                reply = await handler(self, content)
        except Refusal as refusal:
            await self.send_json({"type": "error", **error_body(refusal), "ref": content.get("ref")})
            if isinstance(refusal, SESSION_REFUSALS):
                await self.close(code=CLOSE_SESSION_ENDED)
            return
        except ValidationError as invalid:
            await self.send_json({"type": "error", **invalid_body(invalid), "ref": content.get("ref")})
            return
        if reply is not None:
            await self.send_json({**reply, "ref": content.get("ref")})

    # -- layer events ---------------------------------------------------------------

    async def agent_message_added(self, event: dict[str, Any]) -> None:
        conversation_id = event["conversation"]
        if conversation_id not in self.subscribed or conversation_id in self.resyncing:
            return
        try:
            scope = await self._fresh_scope()
            view = await self.shared.message(scope, conversation_id, event["message"])
        except NotFound:
            await self._drop_subscription(conversation_id)
            return
        except Refusal as refusal:
            await self._end(refusal)
            return
        have = self.subscribed.get(conversation_id, None)
        if have is not None and view.seq <= have:
            return  # the tab has it: it came with the subscribe reply
        if have is not None and view.seq > have + 1:
            await self._resync(conversation_id, "missed message")  # an event before this one never came
            return
        if self.ended:
            return
        self.subscribed[conversation_id] = view.seq
        await self.send(text_data=view.frame(self.language))

    async def agent_answer_delta(self, event: dict[str, Any]) -> None:
        """The answer so far, forwarded only under a scope checked within the last second."""
        conversation_id = event["conversation"]
        if conversation_id not in self.subscribed or conversation_id in self.resyncing:
            return
        if await self._allowed() and not self.ended:
            draft = {k: event[k] for k in ("conversation", "turn", "round", "text")}
            await self.send_json({"type": "delta", **draft, "html": draft_html(event["text"])})

    async def agent_turn_changed(self, event: dict[str, Any]) -> None:
        if event["conversation"] in self.subscribed and await self._allowed():
            await self.send_json({k: event[k] for k in ("conversation", "turn", "status")} | {"type": "turn"})

    async def agent_conversation_changed(self, event: dict[str, Any]) -> None:
        conversation_id = event["conversation"]
        if conversation_id not in self.subscribed:
            return
        try:
            scope = await self._fresh_scope()
            conversation = await database_sync_to_async(conversations.owned_conversation)(scope, conversation_id)
        except NotFound:
            await self._drop_subscription(conversation_id)
            return
        except Refusal as refusal:
            await self._end(refusal)
            return
        if not self.ended:
            await self.send_json(
                {"type": "conversation", "conversation": conversations.conversation_view(conversation)}
            )

    async def agent_line_changed(self, event: dict[str, Any]) -> None:
        """The chat's active line changed: the tab reads it again, and the next message it is told
        of may come after messages now off the line."""
        conversation_id = event["conversation"]
        if conversation_id in self.subscribed and await self._allowed():
            self.subscribed[conversation_id] = None
            await self.send_json({"type": "line_changed", "conversation": conversation_id})

    async def agent_attachment_processed(self, event: dict[str, Any]) -> None:
        if event["conversation"] in self.subscribed and await self._allowed():
            await self.send_json({"type": "attachment", **{k: event[k] for k in ("conversation", "attachment")}})

    async def agent_session_ended(self, event: dict[str, Any]) -> None:
        final = event.get("final")
        if final:
            await self._end(refusal_named(final) if isinstance(final, str) else SessionGone())
            return
        self.checked_after = max(self.checked_after, self.shared.first_seen(event.get("id")))
        await self._allowed()

    async def agent_fell_behind(self, event: dict[str, Any]) -> None:
        """This socket's queue overflowed: every chat it shows reads what it missed."""
        for conversation_id in list(self.subscribed):
            await self._resync(conversation_id, "socket fell behind")

    # -- scope ------------------------------------------------------------------------

    async def _fresh_scope(self, since: float | None = None) -> Scope:
        """This session's scope, checked at or after ``since`` (by default, within ``SCOPE_FRESH_S``).

        Never from before the last revocation this socket heard of: what was
        true before it may no longer be.
        """
        if since is None:
            since = time.monotonic() - SCOPE_FRESH_S
        scope = await self.shared.scope(self.ref, self.impersonated, since=max(since, self.checked_after))
        self.language = language_for(scope.user_settings, self.request_language)
        return scope

    async def _allowed(self, since: float | None = None) -> bool:
        """Whether the session may still act; if not, the socket is told why and closed."""
        try:
            await self._fresh_scope(since)
        except Refusal as refusal:
            await self._end(refusal)
            return False
        return True

    async def _end(self, refusal: Refusal) -> None:
        if self.ended:
            return
        self.ended = True
        self.inbox.clear()
        await self.send_json({"type": "error", **error_body(refusal)})
        await self.close(code=CLOSE_SESSION_ENDED)

    async def _watch(self) -> None:
        """Check the session again at least every ``SOCKET_RECHECK_S``, even when no event comes.

        The backstop for revocations that send no signal: a session row deleted
        or expired, a cached session evicted. Jittered, so that sockets opened
        together do not all check at once; a check another socket of the
        session made within the last second counts. Also keeps this channel in
        its groups, which forget a member after the layer's ``group_expiry``.
        """
        interval = agent_settings.SOCKET_RECHECK_S
        delay = random.uniform(0, interval)
        joined = time.monotonic()
        group_expiry = getattr(self.channel_layer, "group_expiry", None)
        while not self.ended:
            await asyncio.sleep(delay)
            delay = random.uniform(0.8 * interval, interval)
            try:
                if not await self._allowed():
                    return
                if group_expiry and time.monotonic() - joined > group_expiry / 4:
                    await self._join(*self.joined)
                    joined = time.monotonic()
            except Exception as error:  # the database or Redis is away: try again next time
                logger.warning("agent: a socket could not check its session (%s)", type(error).__name__)

    # -- groups and resync ----------------------------------------------------------------

    async def _join(self, *groups: str) -> None:
        self.joined.update(groups)
        await asyncio.gather(*(self.channel_layer.group_add(group, self.channel_name) for group in groups))

    async def _resync(self, conversation_id: str, reason: str) -> None:
        """Tell the tab to read what it missed, as after a reconnect; hold this chat's messages until it does.

        The page answers ``ready`` by subscribing again from the last message it
        has, which also brings the chat's turn up to date.
        """
        if conversation_id in self.resyncing:
            return
        self.resyncing.add(conversation_id)
        events.count_loss(reason)
        await self.send_json({"type": "ready", "resync": conversation_id})

    async def _drop_subscription(self, conversation_id: str) -> None:
        self.subscribed.pop(conversation_id, None)
        self.resyncing.discard(conversation_id)
        await self.channel_layer.group_discard(events.topic(conversation_id), self.channel_name)
        await self.send_json({"type": "conversation_gone", "conversation": conversation_id})


def _utf8_length(text: str) -> int:
    """The frame's size as it came over the wire: UTF-8 bytes, not characters."""
    return len(text.encode("utf-8", "surrogatepass"))
