"""One chat's events over plain HTTP (``text/event-stream``), for networks that let no websocket through.

The page falls back to it when its websocket cannot open. It carries the
frames of a ``feed.Feed`` of one chat, the very feed a websocket carries, so
the events, their order and their checks are the websocket's: the chat's
group is joined through the same checked door, a revoked session ends the
stream with an ``error`` frame, and the session is checked again at least
every ``SOCKET_RECHECK_S`` even when nothing happens. What is the stream's
own: a comment line every ``EVENTS_KEEPALIVE_S`` so proxies keep it open,
and each message frame carries the message's id as the event's ``id``, so a
browser that reconnects on its own (``Last-Event-ID``) gets what it missed
and nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.core.exceptions import ValidationError
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import translation
from django.views.decorators.http import require_GET

from ..access import SessionRef, is_impersonated
from ..core import events
from ..core.conf import agent_settings
from ..core.errors import Refusal, SessionGone, TooManyStreams
from ..core.ids import ConversationId
from ..live import stream_slots
from .feed import FELL_BEHIND, Feed, catch_up
from .http import invalid_response, page_language, refusal_response
from .shared_reads import run_detached

logger = logging.getLogger(__name__)

KEEPALIVE = b": keepalive\n\n"


@require_GET
async def stream(request: HttpRequest) -> HttpResponseBase:
    """``GET ?conversation=<id>&after=<message id>``: the chat's messages after ``after``, then its live events.

    A refusal comes before the stream, as the JSON the other views answer
    with; ``Last-Event-ID`` (a browser reconnecting) wins over ``after``.
    """
    conversation_id = request.GET.get("conversation")
    after = request.headers.get("Last-Event-ID") or request.GET.get("after") or None
    layer = get_channel_layer()
    channel = await layer.new_channel()
    try:
        opened = await database_sync_to_async(_open)(request, conversation_id, after, channel)
    except Refusal as refusal:
        return refusal_response(refusal)
    except ValidationError as invalid:
        return invalid_response(invalid)
    listener = ChatStream(layer, channel, **opened)
    listener.slot = await stream_slots.take(listener.actor.user_id, listener)
    if listener.slot is None:  # the user's sockets and event streams are at their cap
        await events.leave(layer, channel, {events.topic(listener.conversation_id)})
        return refusal_response(TooManyStreams())
    response = StreamingHttpResponse(listener.frames(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each frame on at once
    return response


def _open(request: HttpRequest, conversation_id: ConversationId, after: Any, channel: str) -> dict[str, Any]:
    """Join the chat's group through its checked door and read what the page lacks; refusals raise.

    Everything this request reads from the database is read here, in one
    call that gives its connection back, not held for the stream's life.
    """
    if not request.user.is_authenticated:
        raise SessionGone
    actor = SessionRef.from_request(request)
    impersonated = is_impersonated(request)
    language = page_language(request)
    canonical_id, views, seq = catch_up(
        actor, conversation_id, after, channel, impersonated=impersonated, language=language
    )
    return {
        "actor": actor,
        "impersonated": impersonated,
        "conversation_id": canonical_id,
        "request_language": translation.get_language(),
        "messages": views,
        "seq": seq,
    }


def sse(frame: str, event_id: str | None = None) -> bytes:
    """One frame (JSON text) as an event of the stream; ``event_id`` is what a reconnecting browser sends back."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}data: {frame}\n\n".encode()


class ChatStream:
    """One open event stream: the carrier of its chat's feed, and what it still has to send."""

    def __init__(
        self,
        layer: Any,
        channel: str,
        *,
        actor: SessionRef,
        impersonated: bool,
        conversation_id: str,
        request_language: str | None,
        messages: list[dict[str, Any]],
        seq: int | None,
    ) -> None:
        self.layer = layer
        self.channel = channel
        self.actor = actor
        self.impersonated = impersonated
        self.request_language = request_language
        self.conversation_id = conversation_id
        self.first = messages
        self.seq = seq
        self.out: list[bytes] = []  # frames to send, in order
        self.out_ready = asyncio.Event()
        self.hung_up = False
        self.slot: stream_slots.StreamSlot | None = None  # this stream's place among its user's

    async def carry(self, frame: str, event_id: str | None) -> None:
        self.out.append(sse(frame, event_id))
        self.out_ready.set()

    async def hang_up(self, code: int | None) -> None:
        self.hung_up = True
        self.out_ready.set()

    async def frames(self) -> AsyncIterator[bytes]:
        """The stream's body; whatever ends it (the client gone, a revocation), its groups are left."""
        feed = Feed(
            self,
            self.layer,
            self.channel,
            actor=self.actor,
            impersonated=self.impersonated,
            request_language=self.request_language,
            one_conversation=True,
        )
        feed.subscribe(self.conversation_id, self.seq)
        reader: asyncio.Task[None] | None = None
        try:
            # In the session's groups before the first frame: a revocation from then on reaches this stream.
            await feed.start()
            last = self.first[-1]["id"] if self.first else None
            await feed.send({"type": "subscribed", "conversation": self.conversation_id, "messages": self.first}, last)
            reader = asyncio.ensure_future(self._read(feed))
            async for chunk in self._sent():
                yield chunk
        finally:
            if reader is not None:
                reader.cancel()
            await feed.close()
            if self.slot is not None:
                await asyncio.shield(run_detached(self.slot.release()))

    async def _sent(self) -> AsyncIterator[bytes]:
        """What the feed gave to send, as it comes, with a comment line when it gave nothing for a while."""
        while True:
            if not self.out and not self.hung_up:
                self.out_ready.clear()
                try:
                    await asyncio.wait_for(self.out_ready.wait(), agent_settings.EVENTS_KEEPALIVE_S)
                except asyncio.TimeoutError:
                    yield KEEPALIVE
                    continue
            if self.out:
                chunk, self.out = b"".join(self.out), []
                yield chunk
            if self.hung_up:
                return

    async def _read(self, feed: Feed) -> None:
        """Take this channel's events off the layer as they come, so a slow read holds up no one."""
        try:
            while True:
                await feed.take(await self.layer.receive(self.channel))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("agent: an event stream lost its channel layer")
            feed.enqueue({"type": FELL_BEHIND})
