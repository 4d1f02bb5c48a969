"""What ``agent.ai.streaming`` reads of the ``openai`` SDK's HTTP transport, checked against the installed SDK.

A streamed answer is read from the SDK's ``Stream.response`` (an httpx response), and the
stream's watchdog stops a silent stream by shutting down the socket under it
(``extensions["network_stream"]``). A new SDK or httpx release that moves these would
leave stops and deadlines unable to cut a stream, silently: these tests say what moved.
"""

from __future__ import annotations

import socket
from importlib.metadata import version
from typing import Any

from agent.ai.client import _create
from agent.ai.streaming import _socket_of, _transport_of
from tests.support.model_server import answer

SDK = f"openai {version('openai')}"


def _streamed(endpoint: Any, model_server: Any) -> Any:
    model_server.push(answer("one two three", chunk_delay=0.05))
    body = {"model": endpoint.model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return _create(endpoint, body, None, stream=True)


def test_a_streamed_call_gives_the_response_the_stream_is_read_from(endpoint, model_server) -> None:
    # when a streamed call is made through the SDK
    stream = _streamed(endpoint, model_server)
    response = getattr(stream, "response", None)
    try:
        # then its response is there, with what the reader uses
        assert response is not None, f"{SDK}: a Stream no longer has .response"
        missing = [name for name in ("headers", "iter_bytes", "read", "close") if not hasattr(response, name)]
        assert not missing, f"{SDK}: the streamed response ({type(response)}) has no {missing}"
        assert "text/event-stream" in response.headers.get("content-type", "")
        # and its transport's module names the errors the reader catches
        transport = _transport_of(response)
        for name in ("TimeoutException", "HTTPError"):
            error = getattr(transport, name, None)
            assert isinstance(error, type) and issubclass(error, Exception), (
                f"{SDK}: {transport.__name__}.{name}, which agent.ai.streaming catches, is gone"
            )
    finally:
        if response is not None:
            response.close()


def test_the_watchdog_finds_the_socket_of_an_open_stream(endpoint, model_server) -> None:
    # given a stream that is still open
    response = _streamed(endpoint, model_server).response
    try:
        # then the watchdog can reach the socket it would shut down to stop it
        found = _socket_of(response)
        assert isinstance(found, socket.socket), (
            f"{SDK}: the response's extensions no longer give its socket (network_stream.get_extra_info('socket'): "
            f"{found!r}); a stop or a deadline could no longer cut a silent stream"
        )
        assert found.fileno() >= 0
    finally:
        response.close()
