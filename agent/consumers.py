"""The chat page's websocket (SPEC §10): thin, every frame through the parts' doors.

Channels reads the session once, at connect, so nothing read then is trusted
afterwards: each frame and each event is checked with a fresh scope.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from typing import Any, Awaitable, Callable

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import translation
from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header

from . import confirmations, conversations, events, turns
from .access import SITE_GROUP, SessionRef, authorize_session, is_impersonated, language_for, user_group
from .conf import agent_settings
from .errors import SESSION_REFUSALS, NotFound, Refusal
from .rendering import page_view

logger = logging.getLogger(__name__)

CLOSE_SESSION_ENDED = 4401
CLOSE_TOO_LARGE = 4413
CLOSE_TOO_FAST = 4429


class AgentConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        events.bind_server_loop(asyncio.get_running_loop())
        self.ref = SessionRef.from_scope(self.scope)
        self.impersonated = is_impersonated(self.scope)
        self.subscribed: set[str] = set()
        self.frame_times: deque[float] = deque()
        self.groups_joined: list[str] = []
        self.request_language = request_language(self.scope)
        await self.accept()
        try:
            scope = await database_sync_to_async(authorize_session)(self.ref, impersonated=self.impersonated)
        except Refusal as refusal:
            await self.send_json({"type": "error", "error": refusal.code})
            await self.close(code=CLOSE_SESSION_ENDED)
            return
        self.language = language_for(scope.user_settings, self.request_language)
        for group in (self.ref.group, user_group(self.ref.user_id), SITE_GROUP):
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        await self.send_json({"type": "ready"})

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        for conversation_id in getattr(self, "subscribed", set()):
            await self.channel_layer.group_discard(events.topic(conversation_id), self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if bytes_data is not None or text_data is None or len(text_data) > agent_settings.WS_MAX_FRAME_BYTES:
            await self.close(code=CLOSE_TOO_LARGE)
            return
        if not self._within_rate():
            await self.close(code=CLOSE_TOO_FAST)
            return
        try:
            frame = json.loads(text_data)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            await self.send_json({"type": "error", "error": "bad_frame"})
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
            await self.send_json({"type": "error", "error": "bad_frame", "ref": content.get("ref")})
            return
        try:
            reply = await handler(self, content)
        except Refusal as refusal:
            await self.send_json({"type": "error", "error": refusal.code, "ref": content.get("ref")})
            if isinstance(refusal, SESSION_REFUSALS):
                await self.close(code=CLOSE_SESSION_ENDED)
            return
        except ValidationError as invalid:
            fields = invalid.message_dict if hasattr(invalid, "error_dict") else {"__all__": invalid.messages}
            await self.send_json({"type": "error", "error": "invalid", "fields": fields, "ref": content.get("ref")})
            return
        if reply is not None:
            await self.send_json({**reply, "ref": content.get("ref")})

    # -- frames -----------------------------------------------------------------

    async def frame_subscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        conversation_id = frame.get("conversation")
        await database_sync_to_async(conversations.subscribe)(
            self.ref, conversation_id, self.channel_name, impersonated=self.impersonated
        )
        conversation_id = str(conversations.parse_uuid(conversation_id))  # events name the chat in this form
        self.subscribed.add(conversation_id)
        after = frame.get("after")
        messages = await self._call(
            conversations.list_messages, conversation_id, after=after, latest=after is None
        )
        with translation.override(self.language):
            views = [page_view(m) for m in messages]
        return {"type": "subscribed", "conversation": conversation_id, "messages": views}

    async def frame_unsubscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        conversation_id = str(conversations.parse_uuid(frame.get("conversation")))
        self.subscribed.discard(conversation_id)
        await self.channel_layer.group_discard(events.topic(conversation_id), self.channel_name)
        return {"type": "unsubscribed", "conversation": conversation_id}

    async def frame_send(self, frame: dict[str, Any]) -> dict[str, Any]:
        turn = await self._call(
            turns.start, frame.get("conversation"), frame.get("text"), language=self.language
        )
        return {"type": "accepted", "conversation": str(turn.conversation_id), "turn": str(turn.pk)}

    async def frame_stop(self, frame: dict[str, Any]) -> dict[str, Any]:
        asked = await self._call(turns.stop, frame.get("conversation"))
        return {"type": "stopping", "conversation": str(frame.get("conversation")), "asked": asked}

    async def frame_confirm(self, frame: dict[str, Any]) -> dict[str, Any]:
        card = await self._call(confirmations.confirm, frame.get("confirmation"))
        return {"type": "decided", "confirmation": str(card.pk), "status": card.status}

    async def frame_cancel(self, frame: dict[str, Any]) -> dict[str, Any]:
        card = await self._call(confirmations.cancel, frame.get("confirmation"))
        return {"type": "decided", "confirmation": str(card.pk), "status": card.status}

    FRAMES: dict[str, Callable[["AgentConsumer", dict[str, Any]], Awaitable[dict[str, Any] | None]]] = {
        "subscribe": frame_subscribe,
        "unsubscribe": frame_unsubscribe,
        "send": frame_send,
        "stop": frame_stop,
        "confirm": frame_confirm,
        "cancel": frame_cancel,
    }

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a part's public function for this session, in the user's language."""

        def call() -> Any:
            with translation.override(self.language):
                return fn(self.ref, *args, impersonated=self.impersonated, **kwargs)

        return await database_sync_to_async(call)()

    # -- layer events ---------------------------------------------------------------

    async def agent_message_added(self, event: dict[str, Any]) -> None:
        if event["conversation"] not in self.subscribed:
            return
        try:
            view = await self._call(conversations.get_message, event["conversation"], event["message"])
        except NotFound:
            await self._drop_subscription(event["conversation"])
            return
        except Refusal:
            await self.close(code=CLOSE_SESSION_ENDED)
            return
        with translation.override(self.language):
            view = page_view(view)
        await self.send_json({"type": "message", "message": view})

    async def agent_turn_changed(self, event: dict[str, Any]) -> None:
        if event["conversation"] in self.subscribed and await self._still_allowed():
            await self.send_json({k: event[k] for k in ("conversation", "turn", "status")} | {"type": "turn"})

    async def agent_conversation_changed(self, event: dict[str, Any]) -> None:
        if event["conversation"] not in self.subscribed:
            return
        try:
            conversation = await self._call(conversations.authorize_conversation, event["conversation"])
        except NotFound:
            await self._drop_subscription(event["conversation"])
            return
        except Refusal:
            await self.close(code=CLOSE_SESSION_ENDED)
            return
        await self.send_json({"type": "conversation", "conversation": conversations.conversation_view(conversation[1])})

    async def agent_attachment_processed(self, event: dict[str, Any]) -> None:
        if event["conversation"] in self.subscribed and await self._still_allowed():
            await self.send_json({"type": "attachment", **{k: event[k] for k in ("conversation", "attachment")}})

    async def agent_session_ended(self, event: dict[str, Any]) -> None:
        if event.get("final"):
            await self.send_json({"type": "error", "error": "session_gone"})
            await self.close(code=CLOSE_SESSION_ENDED)
            return
        await self._still_allowed()

    async def _still_allowed(self) -> bool:
        """Check the session again; close the socket when it may no longer act."""
        try:
            scope = await database_sync_to_async(authorize_session)(self.ref, impersonated=self.impersonated)
        except Refusal as refusal:
            await self.send_json({"type": "error", "error": refusal.code})
            await self.close(code=CLOSE_SESSION_ENDED)
            return False
        self.language = language_for(scope.user_settings, self.request_language)
        return True

    async def _drop_subscription(self, conversation_id: str) -> None:
        self.subscribed.discard(conversation_id)
        await self.channel_layer.group_discard(events.topic(conversation_id), self.channel_name)
        await self.send_json({"type": "conversation_gone", "conversation": conversation_id})


def request_language(scope: dict[str, Any]) -> str | None:
    """The socket request's language, as Django's LocaleMiddleware reads it: cookie, then Accept-Language."""
    candidates = [scope.get("cookies", {}).get(settings.LANGUAGE_COOKIE_NAME) or ""]
    headers = dict(scope.get("headers") or [])
    accept = headers.get(b"accept-language", b"").decode("latin-1")
    candidates += [code for code, _q in parse_accept_lang_header(accept) if code != "*"]
    for code in filter(None, candidates):
        try:
            return get_supported_language_variant(code)
        except LookupError:
            continue
    return None
