"""What one tab receives of the chats it shows, whatever carries it: the websocket or the event stream.

A ``Feed`` takes the layer's events for a tab, keeps them in order in its own
queue (a newer draft replaces one not yet delivered; past ``SOCKET_BACKLOG``
the queue is dropped and the tab reads what it missed again), turns each into
the frame the tab gets under a scope checked at most ``SCOPE_FRESH_S`` ago,
and checks the session again at least every ``SOCKET_RECHECK_S`` even when
nothing comes. Its transport (a ``Carrier``) only carries the frames as JSON
text and hangs up when the feed says so, so every event reaches a tab the
same way over both.

The frames a feed sends (``docs/architecture.md`` lists them with the
websocket's replies): ``subscribed`` (``catch_up``'s messages), ``message``,
``delta``, ``turn``, ``conversation``, ``line_changed``, ``attachment``,
``conversation_gone``, ``ready`` with ``resync`` (read the chat again from the
last message held), and ``error`` (the session is over; the transport hangs up).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import deque
from typing import Any, Awaitable, Callable, Protocol, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import translation

from .. import conversations
from ..access import Scope, SessionRef, language_for
from ..core import events
from ..core.conf import agent_settings
from ..core.errors import NotFound, Refusal, SessionGone, error_body, refusal_named
from ..core.ids import ConversationId
from .rendering import draft_html, page_view
from .shared_reads import CLOCK, SCOPE_FRESH_S, SharedReads, run_detached, same_draft

logger = logging.getLogger(__name__)

CLOSE_SESSION_ENDED = 4401
CLOSE_INTERNAL_ERROR = 1011

_Read = TypeVar("_Read")

FELL_BEHIND = "agent.fell_behind"
"""Put in a feed's own queue, never sent: the queue overflowed (or its layer failed) and lost what was in it."""


class Carrier(Protocol):
    """A transport of a feed's frames: the websocket's consumer, the event stream."""

    async def carry(self, frame: str, event_id: str | None) -> None:
        """Send one frame (JSON text); ``event_id`` is the message's id on a ``message`` frame."""

    async def hang_up(self, code: int | None) -> None:
        """Stop sending: the feed ended (``code``, for a socket, says why; ``None``: nothing is wrong)."""


def catch_up(
    actor: SessionRef, conversation_id: ConversationId, after: Any, channel: str, *, impersonated: bool, language: str
) -> tuple[str, list[dict[str, Any]], int | None]:
    """Join a chat's group through its checked door and read what the tab lacks; refusals raise.

    Returns the chat's id as events name it, the page's views of the messages
    after ``after`` (without it, the latest page), and the seq of the last
    message the tab then holds, if known. Without ``after`` the tab holds the
    chat's latest messages, and the next message stored comes after every one
    stored, on the line or off it, so that is the chat's message count.
    """
    conversation = conversations.subscribe(actor, conversation_id, channel, impersonated=impersonated)
    canonical_id = str(conversation.pk)
    try:
        with translation.override(language):
            messages = conversations.list_messages(
                actor, canonical_id, after=after, latest=after is None, impersonated=impersonated
            )
            views = [page_view(m) for m in messages]
    except Exception:
        conversations.unsubscribe(canonical_id, channel)
        raise
    last = messages[-1]["seq"] if messages else None
    seq = max(last or 0, conversation.message_count) if after is None else last
    return canonical_id, views, seq


class Feed:
    """One tab's events: its chats, its queue, its scope checks, its re-check timer.

    ``one_conversation``: the transport shows one chat and cannot subscribe again in
    place (the event stream), so a resync or a chat gone ends the feed and the
    tab opens a new one from its last message.
    """

    def __init__(
        self,
        carrier: Carrier,
        layer: Any,
        channel: str,
        *,
        actor: SessionRef,
        impersonated: bool,
        request_language: str | None,
        one_conversation: bool = False,
    ) -> None:
        self.carrier = carrier
        self.layer = layer
        self.channel = channel
        self.actor = actor
        self.impersonated = impersonated
        self.request_language = request_language
        self.language = request_language or settings.LANGUAGE_CODE
        self.one_conversation = one_conversation
        self.shared = SharedReads.of_running_loop()
        self.subscribed: dict[str, int | None] = {}  # chat → seq of the last message the tab has, if known
        self.resyncing: set[str] = set()  # chats whose tab was told to resync and has not subscribed again
        self.joined: set[str] = set()  # every group the channel joined: all are left when the feed closes
        self.inbox: deque[dict[str, Any]] = deque()  # layer events the tab has yet to get
        self.inbox_ready = asyncio.Event()
        self.delivering = asyncio.Lock()  # an event's delivery and a (un)subscribe take turns
        self.checked_after = 0.0  # a check this feed relies on began after this (a revocation it heard of)
        self.ended = False
        self.tasks: list[asyncio.Task[None]] = []

    # -- life ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the session's groups (a revocation reaches the feed from then on) and start delivering."""
        await self.join(self.actor.group, events.user_group(self.actor.user_id), events.SITE_GROUP)
        self.tasks = [asyncio.ensure_future(self._deliver()), asyncio.ensure_future(self._watch())]

    async def close(self) -> None:
        """Stop the feed's work and leave its groups, even when whoever closes it is cancelled."""
        self.ended = True
        for task in self.tasks:
            task.cancel()
        if self.joined:
            await asyncio.shield(run_detached(events.leave(self.layer, self.channel, self.joined)))

    async def join(self, *groups: str) -> None:
        self.joined.update(groups)
        await asyncio.gather(*(self.layer.group_add(group, self.channel) for group in groups))

    def subscribe(self, conversation_id: str, seq: int | None) -> None:
        """The tab now holds the chat up to ``seq``; drafts queued for it may be older than what it holds."""
        self.joined.add(events.topic(conversation_id))
        self.subscribed[conversation_id] = seq
        self.resyncing.discard(conversation_id)
        self.inbox = deque(
            e for e in self.inbox if e["type"] != events.ANSWER_DELTA or e["conversation"] != conversation_id
        )

    def unsubscribe(self, conversation_id: str) -> None:
        self.subscribed.pop(conversation_id, None)
        self.resyncing.discard(conversation_id)

    # -- the queue ------------------------------------------------------------------------

    async def take(self, event: dict[str, Any]) -> None:
        """An event off the layer: queued in order, but a revocation is handled at once."""
        if event["type"] == events.SESSION_ENDED:
            await self._session_ended(event)
        else:
            self.enqueue(event)

    def enqueue(self, event: dict[str, Any]) -> None:
        if event["type"] == events.ANSWER_DELTA and self.inbox and same_draft(self.inbox[-1], event):
            self.inbox[-1] = event  # a draft not yet delivered: the newer text replaces it
            return
        if len(self.inbox) >= agent_settings.SOCKET_BACKLOG:
            self.inbox.clear()  # what the tab missed, it reads again on resync
            self.inbox.append({"type": FELL_BEHIND})
        self.inbox.append(event)
        self.inbox_ready.set()

    async def _deliver(self) -> None:
        """Work through the queue in order; a failure hangs up as an internal error."""
        try:
            while not self.ended:
                if not self.inbox:
                    self.inbox_ready.clear()
                    await self.inbox_ready.wait()
                    continue
                event = self.inbox.popleft()
                handler = self.HANDLERS.get(event["type"])
                if handler is None:
                    continue  # another part's event on a group the feed is in: not for the tab
                async with self.delivering:
                    if not self.ended:
                        await handler(self, event)
        except Exception:
            logger.exception("agent: a tab's feed could not deliver an event")
            await self._hang_up(CLOSE_INTERNAL_ERROR)

    async def _watch(self) -> None:
        """Check the session again at least every ``SOCKET_RECHECK_S``, even when no event comes.

        The backstop for revocations that send no signal: a session row deleted
        or expired, a cached session evicted. Jittered, so that tabs opened
        together do not all check at once; a check another tab of the session
        made within the last second counts. Also keeps the channel in its
        groups, which forget a member after the layer's ``group_expiry``.
        """
        interval = agent_settings.SOCKET_RECHECK_S
        delay = random.uniform(0, interval)
        joined = time.monotonic()
        group_expiry = getattr(self.layer, "group_expiry", None)
        while not self.ended:
            await asyncio.sleep(delay)
            delay = random.uniform(0.8 * interval, interval)
            try:
                if not await self.allowed():
                    return
                if group_expiry and time.monotonic() - joined > group_expiry / 4:
                    await self.join(*self.joined)
                    joined = time.monotonic()
            except Exception as error:  # the database or Redis is away: try again next time
                logger.warning("agent: a tab's feed could not check its session (%s)", type(error).__name__)

    # -- events ---------------------------------------------------------------------------

    async def _message_added(self, event: dict[str, Any]) -> None:
        conversation_id = event["conversation"]
        if conversation_id not in self.subscribed or conversation_id in self.resyncing:
            return
        view = await self._read(
            conversation_id, lambda scope: self.shared.message(scope, conversation_id, event["message"])
        )
        if view is None:
            return
        have = self.subscribed.get(conversation_id)
        if have is not None and view.seq <= have:
            return  # the tab has it: it came with the subscribe reply
        if have is not None and view.seq > have + 1:
            await self._resync(conversation_id, "missed message")  # an event before this one never came
            return
        if not self.ended:
            self.subscribed[conversation_id] = view.seq
            await self.carrier.carry(view.frame(self.language), view.view["id"])

    async def _answer_delta(self, event: dict[str, Any]) -> None:
        """The answer so far, sent only under a scope checked within the last second."""
        if event["conversation"] in self.resyncing:
            return
        draft = _fields(event, "conversation", "turn", "round", "text")
        await self._send_if_allowed(event, {"type": "delta", **draft, "html": draft_html(event["text"])})

    async def _turn_changed(self, event: dict[str, Any]) -> None:
        """A turn's state; an ended turn whose last message the tab has not got (its event never came, and
        no later message will show the hole) makes the tab read what it missed first."""
        conversation_id, last = event["conversation"], event.get("last_seq")
        have = self.subscribed.get(conversation_id)
        if last is not None and have is not None and have < last and conversation_id not in self.resyncing:
            if await self.allowed() and not self.ended:
                await self._resync(conversation_id, "missed message")
        await self._send_if_allowed(event, {"type": "turn", **_fields(event, "conversation", "turn", "status")})

    async def _attachment_processed(self, event: dict[str, Any]) -> None:
        await self._send_if_allowed(event, {"type": "attachment", **_fields(event, "conversation", "attachment")})

    async def _line_changed(self, event: dict[str, Any]) -> None:
        """The chat's active line changed: the tab reads it again, and the next message it is told
        of may come after messages now off the line."""
        if await self._send_if_allowed(event, {"type": "line_changed", "conversation": event["conversation"]}):
            self.subscribed[event["conversation"]] = None

    async def _conversation_changed(self, event: dict[str, Any]) -> None:
        conversation_id = event["conversation"]
        if conversation_id not in self.subscribed:
            return
        owned = database_sync_to_async(conversations.owned_conversation)
        conversation = await self._read(conversation_id, lambda scope: owned(scope, conversation_id))
        if conversation is None:
            return
        await self.send({"type": "conversation", "conversation": conversations.conversation_view(conversation)})

    async def _session_ended(self, event: dict[str, Any]) -> None:
        final = event.get("final")
        if final:
            await self.end(refusal_named(final) if isinstance(final, str) else SessionGone())
            return
        self.checked_after = max(self.checked_after, self.shared.first_seen(event.get("id")))
        await self.allowed()

    async def _fell_behind(self, event: dict[str, Any]) -> None:
        """The queue overflowed: every chat the tab shows reads what it missed."""
        for conversation_id in list(self.subscribed):
            await self._resync(conversation_id, "tab fell behind")

    HANDLERS: dict[str, Callable[["Feed", dict[str, Any]], Awaitable[None]]] = {
        events.MESSAGE_ADDED: _message_added,
        events.ANSWER_DELTA: _answer_delta,
        events.TURN_CHANGED: _turn_changed,
        events.ATTACHMENT_PROCESSED: _attachment_processed,
        events.LINE_CHANGED: _line_changed,
        events.CONVERSATION_CHANGED: _conversation_changed,
        events.SESSION_ENDED: _session_ended,
        FELL_BEHIND: _fell_behind,
    }
    """Each event a tab hears, by type (``events.KINDS`` names them all; a test holds every one here)."""

    # -- scope, frames, endings -------------------------------------------------------------

    async def fresh_scope(self, since: float | None = None) -> Scope:
        """The session's scope, checked at or after ``since`` (by default, within ``SCOPE_FRESH_S``).

        Never from before the last revocation this feed heard of: what was
        true before it may no longer be.
        """
        if since is None:
            since = CLOCK.now() - SCOPE_FRESH_S
        scope = await self.shared.scope(self.actor, self.impersonated, since=max(since, self.checked_after))
        self.language = language_for(scope.user_settings, self.request_language)
        return scope

    async def _scope_or_end(self, since: float | None = None) -> Scope | None:
        try:
            return await self.fresh_scope(since)
        except Refusal as refusal:
            await self.end(refusal)
            return None

    async def _read(self, conversation_id: str, read: Callable[[Scope], Awaitable[_Read]]) -> _Read | None:
        """What ``read`` reads of a chat under a fresh scope; None when the chat is no longer the
        user's (the tab is told it is gone) or the session is over (the feed ends)."""
        scope = await self._scope_or_end()
        if scope is None:
            return None
        try:
            return await read(scope)
        except NotFound:
            await self._gone(conversation_id)
        except Refusal as refusal:
            await self.end(refusal)
        return None

    async def allowed(self, since: float | None = None) -> bool:
        """Whether the session may still see its chats; if not, the tab is told why and the feed ends."""
        return await self._scope_or_end(since) is not None

    async def _send_if_allowed(self, event: dict[str, Any], frame: dict[str, Any]) -> bool:
        """Send ``frame`` for a chat the tab shows, under a fresh scope; whether it went."""
        if event["conversation"] not in self.subscribed or not await self.allowed() or self.ended:
            return False
        await self.send(frame)
        return True

    async def send(self, frame: dict[str, Any], event_id: str | None = None) -> None:
        await self.carrier.carry(json.dumps(frame), event_id)

    async def end(self, refusal: Refusal) -> None:
        """Send nothing more but an ``error`` frame with the refusal, then hang up."""
        if self.ended:
            return
        self.ended = True
        self.inbox.clear()
        await self.send({"type": "error", **error_body(refusal)})
        await self.carrier.hang_up(CLOSE_SESSION_ENDED)

    async def _resync(self, conversation_id: str, reason: str) -> None:
        """Tell the tab to read what it missed, as after a reconnect; hold this chat's messages until it does."""
        if conversation_id in self.resyncing:
            return
        self.resyncing.add(conversation_id)
        events.count_loss(reason)
        await self.send({"type": "ready", "resync": conversation_id})
        if self.one_conversation:
            await self._hang_up(None)

    async def _gone(self, conversation_id: str) -> None:
        """The chat is no longer the user's to see: the tab hears so and gets nothing more of it."""
        self.unsubscribe(conversation_id)
        await self.layer.group_discard(events.topic(conversation_id), self.channel)
        await self.send({"type": "conversation_gone", "conversation": conversation_id})
        if self.one_conversation:
            await self._hang_up(None)

    async def _hang_up(self, code: int | None) -> None:
        self.ended = True
        self.inbox.clear()
        await self.carrier.hang_up(code)


def _fields(event: dict[str, Any], *names: str) -> dict[str, Any]:
    """What of an event a frame passes on: uuids and states, never content (a draft's text aside)."""
    return {name: event[name] for name in names}
