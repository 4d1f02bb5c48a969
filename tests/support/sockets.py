"""Websockets of a real session through the test site's ASGI stack (origin check, session, auth), for async tests."""

from __future__ import annotations

import json
import time
from typing import Any

from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from agent.core.errors import error_body, refusal_named
from agent.models import Conversation
from tests.asgi import application

ORIGIN = "http://testserver"


def socket(client: Client | None = None, *, origin: str | None = ORIGIN) -> WebsocketCommunicator:
    """A socket with ``client``'s session cookie (none: anonymous), not yet connected."""
    headers = [(b"host", b"testserver")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if client is not None:
        key = client.cookies[settings.SESSION_COOKIE_NAME].value
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={key}".encode()))
    return WebsocketCommunicator(application, "/ws/agent/", headers=headers)


async def opened(client: Client) -> WebsocketCommunicator:
    """A socket of ``client``'s session that the server said ready on."""
    ws = socket(client)
    connected, _ = await ws.connect(timeout=5)
    assert connected
    assert await ws.receive_json_from(timeout=5) == {"type": "ready"}
    return ws


async def subscribed(ws: WebsocketCommunicator, chat: Conversation | Any, **frame: Any) -> dict[str, Any]:
    """Subscribe ``ws`` to ``chat`` and return the server's ``subscribed`` reply."""
    await ws.send_json_to({"type": "subscribe", "conversation": str(getattr(chat, "pk", chat)), "ref": "s1", **frame})
    reply = await ws.receive_json_from(timeout=5)
    assert reply["type"] == "subscribed", reply
    return reply


async def close_code(ws: WebsocketCommunicator, within: float) -> tuple[int | None, list[str]]:
    """Read until the server closes; the close code and the text frames sent before it."""
    frames: list[str] = []
    deadline = time.monotonic() + within
    while True:
        output = await ws.receive_output(timeout=max(deadline - time.monotonic(), 0.01))
        if output["type"] == "websocket.close":
            return output.get("code"), frames
        frames.append(output.get("text"))


async def finish_refused(ws: WebsocketCommunicator) -> None:
    """End a socket the server refused; its consumer holds no groups, so don't wait the full second."""
    await ws.disconnect(timeout=0.1)


def error_frame(code: str, **extra: Any) -> dict[str, Any]:
    """The error frame a socket or an event stream sends for a refusal: its code and its sentence."""
    return {"type": "error", **error_body(refusal_named(code)), **extra}


def parsed(frames: list[str]) -> list[Any]:
    """Text frames (or an event stream's ``data:`` blocks) as JSON."""
    return [json.loads(frame.removeprefix("data: ")) for frame in frames]
