"""The chat page's websocket: its life and its frames' checks; what it carries is its tab's feed.

``AgentConsumer`` reads each frame (size, rate, JSON) and answers it through
its door (``frames.FrameDoors``: a part's public function per frame type) with
the one error contract. Which events reach the tab, in what order and under
which checks, is its ``feed.Feed``'s: the consumer hands it the layer's events
and carries its frames. Who may open the socket is the handshake's
(``handshake``).

Channels reads the session once, at connect, so nothing read then is trusted
afterwards: each frame is checked with a fresh scope, and the feed checks
each event's. A socket takes its events off the layer at once and its feed
works through them in its own task, so a slow read never stops the process
from reading Redis.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.exceptions import ValidationError
from django.utils import translation

from ..access import SessionRef, is_impersonated
from ..core import events
from ..core.conf import agent_settings
from ..core.errors import SESSION_REFUSALS, BadFrame, Refusal, TooManyStreams, error_body, invalid_body
from ..live import stream_slots
from .feed import CLOSE_INTERNAL_ERROR, CLOSE_SESSION_ENDED, Feed
from .frames import FrameDoors
from .handshake import origin_allowed, request_language
from .shared_reads import CLOCK, run_detached

logger = logging.getLogger(__name__)

WEBSOCKET_PATH = "ws/agent/"
"""Where the chat page's socket connects: ``agent.routing`` routes it here, the page reads it."""

CLOSE_TOO_LARGE = 4413
CLOSE_TOO_FAST = CLOSE_TOO_MANY_STREAMS = 4429
CLOSE_CODES = {
    "session_ended": CLOSE_SESSION_ENDED,
    "too_large": CLOSE_TOO_LARGE,
    "too_fast": CLOSE_TOO_FAST,
    "too_many_streams": CLOSE_TOO_MANY_STREAMS,
    "internal_error": CLOSE_INTERNAL_ERROR,
}
"""The close codes by name, as the page reads them."""

SUBSCRIPTION_FRAMES = {"subscribe", "unsubscribe"}


class AgentConsumer(FrameDoors, AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        if not origin_allowed(self.scope):
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        events.bind_server_loop(asyncio.get_running_loop())
        self.actor = SessionRef.from_scope(self.scope)
        self.impersonated = is_impersonated(self.scope)
        self.frame_times: deque[float] = deque()
        self.request_language = request_language(self.scope)
        self.feed = Feed(
            self,
            self.channel_layer,
            self.channel_name,
            actor=self.actor,
            impersonated=self.impersonated,
            request_language=self.request_language,
        )
        self.slot: stream_slots.StreamSlot | None = None
        await self.accept()
        if not await self.feed.allowed(since=CLOCK.now()):
            return
        self.slot = await stream_slots.take(self.actor.user_id, self)
        if self.slot is None:  # the user's sockets and event streams are at their cap
            with translation.override(self.feed.language):
                await self.send_json({"type": "error", **error_body(TooManyStreams())})
            await self.close(code=CLOSE_TOO_MANY_STREAMS)
            return
        await self.feed.start()
        await self.send_json({"type": "ready"})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The socket's whole life; its groups are left however it ends, the channel layer failing included."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            feed = getattr(self, "feed", None)
            if feed is not None:
                await feed.close()
            slot = getattr(self, "slot", None)
            if slot is not None:
                await asyncio.shield(run_detached(slot.release()))

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, but layer events go to the feed and nothing waits for the database.

        Channels pulls a process's events from Redis only while some socket
        waits for one, so a socket that read the database before taking its
        next event would hold up every socket of the process. Channels'
        database hop before every message is left out: every read here tidies
        the thread's connection itself.
        """
        if message["type"].startswith("agent."):
            await self.feed.take(message)
            return
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    # -- the feed's carrier -----------------------------------------------------------------

    async def carry(self, frame: str, event_id: str | None) -> None:
        await self.send(text_data=frame)

    async def hang_up(self, code: int | None) -> None:
        await self.close(code=code or CLOSE_INTERNAL_ERROR)

    # -- frames -----------------------------------------------------------------------------

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
                async with self.feed.delivering:
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


def _utf8_length(text: str) -> int:
    """The frame's size as it came over the wire: UTF-8 bytes, not characters."""
    return len(text.encode("utf-8", "surrogatepass"))
