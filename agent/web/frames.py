"""What each frame from the chat page asks of the parts: one door call per frame type.

``FrameDoors`` is mixed into the socket's consumer (``consumers.AgentConsumer``),
which reads, checks and answers the frames; a door runs for the socket's session,
in the user's language. The subscribe and unsubscribe doors also tell the
socket's feed (``feed.Feed``) which chats its tab shows.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.utils import translation

from .. import confirmations, conversations, turns
from ..access import SessionRef
from .feed import Feed, catch_up


class FrameDoors:
    """The frames' doors, for a consumer that keeps the attributes below (set when it connects)."""

    actor: SessionRef
    impersonated: bool
    channel_name: str
    feed: Feed

    async def frame_subscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        conversation_id, views, seq = await database_sync_to_async(catch_up)(
            self.actor,
            frame.get("conversation"),
            frame.get("after"),
            self.channel_name,
            impersonated=self.impersonated,
            language=self.feed.language,
        )
        self.feed.subscribe(conversation_id, seq)
        return {"type": "subscribed", "conversation": conversation_id, "messages": views}

    async def frame_unsubscribe(self, frame: dict[str, Any]) -> dict[str, Any]:
        conversation_id = str(conversations.parse_uuid(frame.get("conversation")))
        self.feed.unsubscribe(conversation_id)
        await sync_to_async(conversations.unsubscribe, thread_sensitive=False)(conversation_id, self.channel_name)
        return {"type": "unsubscribed", "conversation": conversation_id}

    async def frame_send(self, frame: dict[str, Any]) -> dict[str, Any]:
        files = frame.get("attachment_ids") or []
        if not isinstance(files, list):
            files = [files]  # for_turn refuses what is not an id of this chat's ready files
        turn = await self._call(
            turns.start, frame.get("conversation"), frame.get("text"), attachment_ids=files, language=self.feed.language
        )
        return {"type": "accepted", "conversation": str(turn.conversation_id), "turn": str(turn.pk)}

    async def frame_stop(self, frame: dict[str, Any]) -> dict[str, Any]:
        asked = await self._call(turns.stop, frame.get("conversation"))
        return {"type": "stopping", "conversation": str(frame.get("conversation")), "asked": asked}

    async def frame_edit(self, frame: dict[str, Any]) -> dict[str, Any]:
        files = frame.get("attachment_ids")
        if files is not None and not isinstance(files, list):
            files = [files]
        turn = await self._call(
            turns.edit_message,
            frame.get("conversation"),
            frame.get("message"),
            frame.get("text"),
            attachment_ids=files,
            language=self.feed.language,
        )
        return {"type": "accepted", "conversation": str(turn.conversation_id), "turn": str(turn.pk)}

    async def frame_regenerate(self, frame: dict[str, Any]) -> dict[str, Any]:
        turn = await self._call(
            turns.regenerate, frame.get("conversation"), frame.get("message"), language=self.feed.language
        )
        return {"type": "accepted", "conversation": str(turn.conversation_id), "turn": str(turn.pk)}

    async def frame_switch(self, frame: dict[str, Any]) -> dict[str, Any]:
        changed = await self._call(turns.switch_version, frame.get("conversation"), frame.get("message"))
        return {"type": "switched", "conversation": str(frame.get("conversation")), "changed": changed}

    async def frame_confirm(self, frame: dict[str, Any]) -> dict[str, Any]:
        confirmation = await self._call(confirmations.confirm, frame.get("confirmation"), edits=frame.get("edits"))
        return {
            "type": "decided",
            "confirmation": str(confirmation.pk),
            "status": confirmation.status,
            "edited": bool(confirmation.edits),
        }

    async def frame_cancel(self, frame: dict[str, Any]) -> dict[str, Any]:
        confirmation = await self._call(confirmations.cancel, frame.get("confirmation"))
        return {"type": "decided", "confirmation": str(confirmation.pk), "status": confirmation.status}

    FRAMES: dict[str, Callable[["FrameDoors", dict[str, Any]], Awaitable[dict[str, Any] | None]]] = {
        "subscribe": frame_subscribe,
        "unsubscribe": frame_unsubscribe,
        "send": frame_send,
        "stop": frame_stop,
        "edit": frame_edit,
        "regenerate": frame_regenerate,
        "switch": frame_switch,
        "confirm": frame_confirm,
        "cancel": frame_cancel,
    }

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a part's public function for this session, in the user's language."""

        def call() -> Any:
            with translation.override(self.feed.language):
                return fn(self.actor, *args, impersonated=self.impersonated, **kwargs)

        return await database_sync_to_async(call)()
