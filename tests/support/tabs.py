"""A tab's live feed of one chat over either transport, read the same way: the websocket or the event stream."""

from __future__ import annotations

import json
from typing import Any

from channels.testing import WebsocketCommunicator
from django.test import Client

from tests.support import sockets, streams

TRANSPORTS = ("socket", "stream")


class Tab:
    """A tab of ``client``'s session showing one chat over ``transport``; its frames in the order sent."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.ws: WebsocketCommunicator | None = None
        self.stream: streams.EventStream | None = None
        self.first: dict[str, Any] = {}

    @classmethod
    async def open(cls, transport: str, client: Client, chat: Any, **query: Any) -> "Tab":
        """Opened and caught up: ``first`` is the ``subscribed`` frame."""
        tab = cls(transport)
        if transport == "socket":
            tab.ws = await sockets.opened(client)
            tab.first = await sockets.subscribed(tab.ws, chat, **query)
        else:
            tab.stream = await streams.opened(client, conversation=getattr(chat, "pk", chat), **query)
            tab.first = (await tab.stream.event())[1]
            assert tab.first["type"] == "subscribed", tab.first
        return tab

    async def frame(self, timeout: float = 5) -> dict[str, Any]:
        """The next frame (a socket's close comes as ``{"type": "closed", "code": ...}``)."""
        if self.ws is not None:
            output = await self.ws.receive_output(timeout=timeout)
            if output["type"] == "websocket.close":
                return {"type": "closed", "code": output.get("code")}
            return dict(json.loads(output["text"]))
        assert self.stream is not None
        return (await self.stream.event(timeout))[1]

    async def frames_until(self, kind: str, timeout: float = 5) -> list[dict[str, Any]]:
        """Every frame up to and including the first of type ``kind``."""
        seen = [await self.frame(timeout)]
        while seen[-1]["type"] != kind:
            seen.append(await self.frame(timeout))
        return seen

    async def ended(self, timeout: float = 5) -> bool:
        """Whether the server hangs up next (a socket closes; a stream's body ends), with nothing before."""
        if self.ws is not None:
            return (await self.frame(timeout))["type"] == "closed"
        assert self.stream is not None
        return await self.stream.rest(timeout) == []

    async def nothing_for(self, seconds: float) -> bool:
        if self.ws is not None:
            return bool(await self.ws.receive_nothing(timeout=seconds))
        assert self.stream is not None
        return await self.stream.nothing_for(seconds)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.disconnect()
        elif self.stream is not None and not self.stream.finished:
            await self.stream.close()
