"""An ASGI wrapper for a site's HTTP app that refuses an oversized request body before Django reads it.

Django's ASGI handler reads the whole body into a temporary file before any
view runs, so a view's own size check comes too late: a client that declares
two gigabytes keeps the server reading (and writing to disk) until it stops.
Wrapped, the app answers 413 at once when ``Content-Length`` is over the
limit, and stops reading a chunked body as soon as it passes it.

The limit is ``AGENT["MAX_REQUEST_BYTES"]``; unset, the larger of the biggest
file a user may attach or recording they may send (plus room for the form around it) and Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE``; 0 turns the wrapper off. A server that reads
the body before it calls the app (daphne does) still reads it: put the same
limit on the front proxy too.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from django.conf import settings

from ..core.conf import agent_settings
from ..core.errors import TooLarge, error_body

FORM_MARGIN_BYTES = 1024 * 1024
"""Room for the multipart envelope and the form's other fields around an attached file."""

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def max_request_bytes() -> int:
    """The largest request body the wrapped app accepts (0: no limit of its own)."""
    configured = agent_settings.MAX_REQUEST_BYTES
    if configured is not None:
        return int(configured)
    largest_file = max(agent_settings.MAX_FILE_BYTES, agent_settings.MAX_VOICE_BYTES)
    return max(largest_file + FORM_MARGIN_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)


class BodyLimitMiddleware:
    """Wraps an ASGI HTTP app: ``BodyLimitMiddleware(get_asgi_application())``."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = max_request_bytes() if scope["type"] == "http" else 0
        if not limit:
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send)
            return
        received = 0
        refused = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Answered here; the app is told the client went away, so it stops reading and sends nothing.
                    refused = True
                    await _refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)


def _declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` (None: absent or not a number, as for a chunked body)."""
    for name, value in scope.get("headers") or []:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send) -> None:
    body = json.dumps(error_body(TooLarge())).encode()  # in the site's language: no user is known yet
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the rest of the body is never read
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
