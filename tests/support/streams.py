"""Event streams over HTTP of a real session through the test site's ASGI stack, for async tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlencode

from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.asgi import application


class EventStream:
    """``GET agent:events`` with ``client``'s session cookie, read event by event as the server sends them."""

    def __init__(self, client: Client | None, headers: dict[str, str] | None = None, **query: Any) -> None:
        raw = [(b"host", b"testserver")]
        if client is not None:
            key = client.cookies[settings.SESSION_COOKIE_NAME].value
            raw.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={key}".encode()))
        raw += [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
        path = reverse("agent:events")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": urlencode({k: str(v) for k, v in query.items() if v is not None}).encode(),
            "root_path": "",
            "headers": raw,
            "client": ("127.0.0.1", 40000),
            "server": ("testserver", 80),
        }
        self.app = ApplicationCommunicator(application, scope)
        self.buffer = b""
        self.finished = False
        self.status = 0
        self.headers: dict[str, str] = {}

    async def start(self) -> "EventStream":
        await self.app.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await self.app.receive_output(timeout=5)
        assert start["type"] == "http.response.start", start
        self.status = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        return self

    async def _more(self, timeout: float) -> bool:
        """Read one body chunk into the buffer; False when the response ended."""
        if self.finished:
            return False
        message = await self.app.receive_output(timeout=timeout)
        assert message["type"] == "http.response.body", message
        self.buffer += message.get("body", b"")
        self.finished = not message.get("more_body", False)
        return True

    async def body_json(self) -> Any:
        while await self._more(timeout=5):
            pass
        return json.loads(self.buffer)

    async def block(self, timeout: float = 5) -> str | None:
        """The next event or comment as sent (``None`` when the stream ended first)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while b"\n\n" not in self.buffer:
            if not await self._more(timeout=max(deadline - loop.time(), 0.01)):
                return None
        block, self.buffer = self.buffer.split(b"\n\n", 1)
        return block.decode()

    async def event(self, timeout: float = 5) -> tuple[str | None, dict[str, Any]]:
        """The next event's ``id`` and frame, skipping comment lines."""
        while True:
            block = await self.block(timeout)
            assert block is not None, "the stream ended"
            if block.startswith(":"):
                continue
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            return fields.get("id"), json.loads(fields["data"])

    async def nothing_for(self, seconds: float) -> bool:
        """Whether nothing more came for ``seconds`` (without the time-out that would cancel the app)."""
        return b"\n\n" not in self.buffer and await self.app.receive_nothing(timeout=seconds)

    async def rest(self, timeout: float = 5) -> list[str]:
        """Every block sent until the server ends the stream."""
        blocks = []
        while (block := await self.block(timeout)) is not None:
            blocks.append(block)
        return blocks

    async def close(self) -> None:
        """The client goes away; the server's handler must finish."""
        await self.app.send_input({"type": "http.disconnect"})
        await self.app.wait(timeout=5)


async def opened(client: Client | None, **query: Any) -> EventStream:
    return await EventStream(client, **query).start()
