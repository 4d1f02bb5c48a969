"""One chat's events over plain HTTP (``text/event-stream``), for networks that let no websocket through.

The page falls back to it when its websocket cannot open. It sends the
websocket's frames for one chat under the websocket's rules: the chat's
group is joined through the same checked door, every event is read under a
scope checked at most ``SCOPE_FRESH_S`` ago, a revoked session ends the
stream with an ``error`` frame, and the session is checked again at least
every ``SOCKET_RECHECK_S`` even when nothing happens. Each message frame
carries the message's id as the event's ``id``, so a browser that reconnects
on its own (``Last-Event-ID``) gets what it missed and nothing twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import deque
from typing import Any, AsyncIterator

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import translation
from django.views.decorators.http import require_GET

from .. import conversations, events
from ..access import Scope, SessionRef, is_impersonated, language_for
from ..conf import agent_settings
from ..errors import NotFound, Refusal, SessionGone, error_body, refusal_named
from .delivery import SCOPE_FRESH_S, SharedReads, run_detached, same_draft
from .http import invalid_response, page_language, refusal_response
from .rendering import draft_html, page_view

logger = logging.getLogger(__name__)

FELL_BEHIND = "agent.fell_behind"
"""Put in a stream's own queue, never sent: the queue overflowed and lost what was in it."""

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
    response = StreamingHttpResponse(listener.frames(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each frame on at once
    return response


def _open(request: HttpRequest, conversation_id: Any, after: Any, channel: str) -> dict[str, Any]:
    """Join the chat's group through its checked door and read what the page lacks; refusals raise.

    Everything this request reads from the database is read here, in one
    call that gives its connection back, not held for the stream's life.
    """
    if not request.user.is_authenticated:
        raise SessionGone
    ref = SessionRef.from_request(request)
    impersonated = is_impersonated(request)
    language = page_language(request)
    conversations.subscribe(ref, conversation_id, channel, impersonated=impersonated)
    chat = str(conversations.parse_uuid(conversation_id))  # events name the chat in this form
    try:
        with translation.override(language):
            messages = conversations.list_messages(
                ref, chat, after=after, latest=after is None, impersonated=impersonated
            )
            views = [page_view(m) for m in messages]
    except Exception:
        conversations.unsubscribe(chat, channel)
        raise
    return {
        "ref": ref,
        "impersonated": impersonated,
        "conversation_id": chat,
        "request_language": translation.get_language(),
        "messages": views,
        # Without ``after`` the page holds the chat's latest messages, so none (0) when the chat is empty.
        "seq": messages[-1]["seq"] if messages else (0 if after is None else None),
    }


def sse(frame: dict[str, Any], event_id: str | None = None) -> bytes:
    """One frame as an event of the stream; ``event_id`` is what a reconnecting browser sends back."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}data: {json.dumps(frame)}\n\n".encode()


class ChatStream:
    """One open event stream: its channel, its groups, and what it still has to send."""

    def __init__(
        self,
        layer: Any,
        channel: str,
        *,
        ref: SessionRef,
        impersonated: bool,
        conversation_id: str,
        request_language: str | None,
        messages: list[dict[str, Any]],
        seq: int | None,
    ) -> None:
        self.layer = layer
        self.channel = channel
        self.ref = ref
        self.impersonated = impersonated
        self.conversation_id = conversation_id
        self.request_language = request_language
        self.language = request_language or settings.LANGUAGE_CODE
        self.first = messages
        self.seq = seq  # of the last message the page has, if known
        self.joined = {events.topic(conversation_id)}
        self.inbox: deque[dict[str, Any]] = deque()
        self.inbox_ready = asyncio.Event()
        self.checked_after = 0.0  # a check this stream relies on began after this (a revocation it heard of)
        self.out: list[bytes] = []  # frames to send, in order
        self.ended = False

    async def frames(self) -> AsyncIterator[bytes]:
        """The stream's body; whatever ends it (the client gone, a revocation), its groups are left."""
        self.shared = SharedReads.of_running_loop()
        reader: asyncio.Task[None] | None = None
        try:
            # In the session's groups before the first frame: a revocation from then on reaches this stream.
            await self._join(self.ref.group, events.user_group(self.ref.user_id), events.SITE_GROUP)
            last = self.first[-1]["id"] if self.first else None
            yield sse({"type": "subscribed", "conversation": self.conversation_id, "messages": self.first}, last)
            reader = asyncio.ensure_future(self._read())
            async for chunk in self._live():
                yield chunk
        finally:
            if reader is not None:
                reader.cancel()
            # Shielded: when the server stops waiting for this stream, its groups are still left.
            await asyncio.shield(run_detached(self._leave()))

    async def _live(self) -> AsyncIterator[bytes]:
        keepalive_s = agent_settings.EVENTS_KEEPALIVE_S
        recheck_s = agent_settings.SOCKET_RECHECK_S
        now = time.monotonic()
        keepalive_at = now + keepalive_s
        recheck_at = now + random.uniform(0.8 * recheck_s, recheck_s)
        joined_at = now
        group_expiry = getattr(self.layer, "group_expiry", None)
        while not self.ended:
            if not self.inbox:
                self.inbox_ready.clear()
                wait = max(0.0, min(keepalive_at, recheck_at) - time.monotonic())
                try:
                    await asyncio.wait_for(self.inbox_ready.wait(), wait)
                except asyncio.TimeoutError:
                    pass
            now = time.monotonic()
            if now >= recheck_at:
                recheck_at = now + random.uniform(0.8 * recheck_s, recheck_s)
                try:
                    await self._allowed()
                    if group_expiry and now - joined_at > group_expiry / 4:
                        await self._join(*self.joined)
                        joined_at = now
                except Exception as error:  # the database or Redis is away: try again next time
                    logger.warning("agent: an event stream could not check its session (%s)", type(error).__name__)
            elif self.inbox:
                event = self.inbox.popleft()
                await getattr(self, get_handler_name(event), self._ignore)(event)
            if self.out:
                keepalive_at = time.monotonic() + keepalive_s
                chunk, self.out = b"".join(self.out), []
                yield chunk
            elif time.monotonic() >= keepalive_at:
                keepalive_at = time.monotonic() + keepalive_s
                yield KEEPALIVE

    async def _read(self) -> None:
        """Take this channel's events off the layer as they come, so a slow read holds up no one."""
        try:
            while True:
                self._enqueue(await self.layer.receive(self.channel))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("agent: an event stream lost its channel layer")
            self._enqueue({"type": FELL_BEHIND})

    def _enqueue(self, event: dict[str, Any]) -> None:
        if event["type"] == events.ANSWER_DELTA and self.inbox and same_draft(self.inbox[-1], event):
            self.inbox[-1] = event  # a draft not yet sent: the newer text replaces it
            return
        if len(self.inbox) >= agent_settings.SOCKET_BACKLOG:
            self.inbox.clear()  # what the page missed, it reads again on resync
            event = {"type": FELL_BEHIND}
        self.inbox.append(event)
        self.inbox_ready.set()

    async def _join(self, *groups: str) -> None:
        self.joined.update(groups)
        await asyncio.gather(*(self.layer.group_add(group, self.channel) for group in groups))

    async def _leave(self) -> None:
        await events.leave(self.layer, self.channel, self.joined)

    # -- layer events ---------------------------------------------------------------

    async def agent_message_added(self, event: dict[str, Any]) -> None:
        if event["conversation"] != self.conversation_id:
            return
        scope = await self._fresh_scope_or_end()
        if scope is None:
            return
        try:
            view = await self.shared.message(scope, self.conversation_id, event["message"])
        except NotFound:
            self._gone()
            return
        except Refusal as refusal:
            self._end(refusal)
            return
        if self.seq is not None and view.seq <= self.seq:
            return  # the page has it: it came with the first frame
        if self.seq is not None and view.seq > self.seq + 1:
            self._resync("missed message")  # an event before this one never came
            return
        self.seq = view.seq
        self.out.append(f"id: {view.view['id']}\ndata: {view.frame(self.language)}\n\n".encode())

    async def agent_answer_delta(self, event: dict[str, Any]) -> None:
        """The answer so far, sent only under a scope checked within the last second, formatted as
        the socket formats it."""
        if event["conversation"] == self.conversation_id and await self._allowed():
            draft = {k: event[k] for k in ("conversation", "turn", "round", "text")}
            self.out.append(sse({"type": "delta", **draft, "html": draft_html(event["text"])}))

    async def agent_turn_changed(self, event: dict[str, Any]) -> None:
        if event["conversation"] == self.conversation_id and await self._allowed():
            self.out.append(sse({k: event[k] for k in ("conversation", "turn", "status")} | {"type": "turn"}))

    async def agent_attachment_processed(self, event: dict[str, Any]) -> None:
        if event["conversation"] == self.conversation_id and await self._allowed():
            self.out.append(sse({"type": "attachment", **{k: event[k] for k in ("conversation", "attachment")}}))

    async def agent_conversation_changed(self, event: dict[str, Any]) -> None:
        if event["conversation"] != self.conversation_id:
            return
        scope = await self._fresh_scope_or_end()
        if scope is None:
            return
        try:
            chat = await database_sync_to_async(conversations.owned_conversation)(scope, self.conversation_id)
        except NotFound:
            self._gone()
            return
        self.out.append(sse({"type": "conversation", "conversation": conversations.conversation_view(chat)}))

    async def agent_session_ended(self, event: dict[str, Any]) -> None:
        final = event.get("final")
        if final:
            self._end(refusal_named(final) if isinstance(final, str) else SessionGone())
            return
        self.checked_after = max(self.checked_after, self.shared.first_seen(event.get("id")))
        await self._allowed()

    async def agent_fell_behind(self, event: dict[str, Any]) -> None:
        self._resync("event stream fell behind")

    async def _ignore(self, event: dict[str, Any]) -> None:
        """Another part's event on a group this stream is in: not for the page."""

    # -- scope and ending ---------------------------------------------------------------

    async def _fresh_scope(self) -> Scope:
        since = max(time.monotonic() - SCOPE_FRESH_S, self.checked_after)
        scope = await self.shared.scope(self.ref, self.impersonated, since=since)
        self.language = language_for(scope.user_settings, self.request_language)
        return scope

    async def _fresh_scope_or_end(self) -> Scope | None:
        try:
            return await self._fresh_scope()
        except Refusal as refusal:
            self._end(refusal)
            return None

    async def _allowed(self) -> bool:
        """Whether the session may still see the chat; if not, the page is told why and the stream ends."""
        return await self._fresh_scope_or_end() is not None

    def _end(self, refusal: Refusal) -> None:
        """Send nothing more but an ``error`` frame with the refusal, then end the stream."""
        self.out = [sse({"type": "error", **error_body(refusal)})]
        self._stop()

    def _gone(self) -> None:
        self.out.append(sse({"type": "conversation_gone", "conversation": self.conversation_id}))
        self._stop()

    def _resync(self, reason: str) -> None:
        """Tell the page to read what it missed by opening the stream again from its last message."""
        events.count_loss(reason)
        self.out.append(sse({"type": "ready", "resync": self.conversation_id}))
        self._stop()

    def _stop(self) -> None:
        self.ended = True
        self.inbox.clear()
