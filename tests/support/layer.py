"""A plain channel on the real Redis channel layer, for tests that listen to groups."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


class Listener:
    """A channel of its own (no ``!``, so every read goes straight to Redis)."""

    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.name = f"agenttest.{uuid.uuid4().hex}"

    def join(self, group: str) -> None:
        async_to_sync(self.layer.group_add)(group, self.name)

    def send_to_group(self, group: str, event: dict[str, Any]) -> None:
        async_to_sync(self.layer.group_send)(group, event)

    def receive(self, timeout: float = 2.0) -> dict[str, Any] | None:
        """The next message, or None when none arrives within ``timeout``."""

        async def read() -> dict[str, Any] | None:
            try:
                return await asyncio.wait_for(self.layer.receive(self.name), timeout)
            except asyncio.TimeoutError:
                return None

        return async_to_sync(read)()

    def is_quiet(self) -> bool:
        """Whether nothing was sent to this channel so far, without waiting for silence.

        A marker goes straight to the channel; what was sent before it
        arrives before it.
        """
        async_to_sync(self.layer.send)(self.name, {"type": "test.marker"})
        first = self.receive()
        assert first is not None, "the marker never arrived"
        if first["type"] == "test.marker":
            return True
        while self.receive(timeout=0.5) not in (None, {"type": "test.marker"}):
            pass
        return False

    def hears(self, group: str) -> bool:
        """Whether this channel is in ``group``: a ping to the group, then ``is_quiet``."""
        self.send_to_group(group, {"type": "test.ping"})
        return not self.is_quiet()
