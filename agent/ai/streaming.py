"""A streamed answer: its server-sent events read as they come, under a watchdog that can cut it.

Apart from ``complete()`` (``client``), which asks for a stream when the caller follows the answer
as it comes, because reading one is a job of its own: a thread that looks for a stop or the deadline
while the caller waits, and a socket shut down under a reader blocked on it. The SDK's HTTP transport
is reached in two small functions only (``_socket_of``, ``_transport_of``), through its documented
surface, each checked against the installed SDK by ``tests/ai/test_transport_shape.py``.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from datetime import datetime
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator

from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection
from django.utils import timezone

from .providers import AIError, Answer, OpenAICompatible, StreamAssembly


def seconds_left(deadline: datetime | None) -> float:
    """How long until ``deadline``: infinite without one, zero or less once it has passed."""
    if deadline is None:
        return float("inf")
    return (deadline - timezone.now()).total_seconds()


class Interrupted(Exception):
    """What ``on_chunk`` or the watch raised, carried out of the stream to be raised again once journalled."""

    def __init__(self, reason: Exception) -> None:
        super().__init__(type(reason).__name__)
        self.reason = reason


WATCH_EVERY_S = 0.25
"""How often a stream's watchdog wakes: a stop or the deadline halts a silent stream well within a second."""


class Watchdog:
    """Ends a streamed call when ``watch`` raises or the deadline passes, whatever the call waits for:
    the answer's headers (the model has not begun) or a chunk that may not come.

    Until the headers come, the request is sent from a thread of its own (``open``) while the
    caller, idle meanwhile, looks at the deadline and calls ``watch`` itself (on its own database
    connection): a cut stops its wait at once and the response, if it still comes, is closed
    unread. From then on a thread of the watchdog's own does the looking while the caller reads;
    a cut shuts the response's socket down, which wakes the reader blocked on it. What stopped
    the call is kept in ``reason`` for the caller to raise. Once ``stop`` returns, nothing is cut:
    the connection may be back in the pool.
    """

    def __init__(self, deadline: datetime | None, watch: Callable[[], None] | None) -> None:
        self.deadline = deadline
        self.watch = watch
        self.reason: Exception | None = None
        self.response: Any = None
        self._wake = threading.Event()  # the caller of ``open`` waits no longer: a response, a failure or a cut
        self._stopped = threading.Event()
        self._cutting = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="agent-stream-watchdog", daemon=True)

    def stop(self) -> None:
        with self._cutting:
            self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def open(self, send: Callable[[], Any]) -> Any:
        """``send()``'s streamed response, or the reason the watchdog cut the wait for it."""
        sent: list[Any] = []
        failed: list[BaseException] = []
        settled = threading.Event()

        def sender() -> None:
            try:
                stream = send()
            except BaseException as error:  # the caller's to raise, unless it has stopped waiting
                failed.append(error)
            else:
                if self.attach(stream.response):
                    sent.append(stream)
                else:
                    stream.response.close()  # cut while the headers came: nobody reads it
            finally:
                settled.set()
                self._wake.set()

        threading.Thread(target=sender, name="agent-model-request", daemon=True).start()
        while not self._wake.wait(WATCH_EVERY_S):
            self._look()
        if sent:
            if self.reason is None:
                self._thread.start()  # the caller reads from now on: the watchdog's thread looks
            return sent[0]  # cut since it was attached: reading it raises, and the caller raises ``reason``
        if self.reason is not None:
            raise self.reason
        settled.wait()
        raise failed[0]

    def attach(self, response: Any) -> bool:
        """The response whose socket a cut shuts down from now on; False when the call was cut or left
        already (its caller raised meanwhile, a task's time limit say): then nobody will read it."""
        with self._cutting:
            if self.reason is not None or self._stopped.is_set():
                return False
            self.response = response
            return True

    def _look(self) -> bool:
        """Cut the call when its deadline has passed or ``watch`` raises; True when it was cut."""
        if seconds_left(self.deadline) <= 0:
            self._cut(AIError("deadline"))
            return True
        if self.watch is not None:
            try:
                self.watch()
            except Exception as reason:
                self._cut(Interrupted(reason))
                return True
        return False

    def _run(self) -> None:
        try:
            while not self._stopped.wait(WATCH_EVERY_S):
                if self._look():
                    return
        finally:
            connection.close()  # the watch's own database connection, opened in this thread

    def _cut(self, reason: Exception) -> None:
        """Stop the caller's wait: shut the response's socket down, or, before it came, wake the caller."""
        with self._cutting:
            if self._stopped.is_set():
                return
            self.reason = reason
            self._wake.set()
            if self.response is None:
                return
            sock = _socket_of(self.response)
            try:
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
                else:
                    self.response.close()
            except OSError:
                pass  # already closed: the reader has ended anyway


def _socket_of(response: Any) -> Any:
    """The socket a streamed response is read from, when the transport tells.

    Read through httpx's documented ``network_stream`` response extension (its ``get_extra_info``),
    because a reader blocked on a socket wakes when another thread shuts the socket down, and the
    SDK offers no way to it of its own. ``None`` where the transport does not tell: the cut then
    closes the response instead.
    """
    network = (getattr(response, "extensions", None) or {}).get("network_stream")
    try:
        return network.get_extra_info("socket") if network is not None else None
    except Exception:
        return None


def _transport_of(response: Any) -> ModuleType:
    """The module of the HTTP library a streamed response came from (httpx, or httpx2 in newer SDKs),
    whose ``TimeoutException`` and ``HTTPError`` a read of the stream may raise.

    Found from the response's own type, as the SDK does not re-export them: importing httpx here
    would catch nothing once the SDK moves to another library.
    """
    return sys.modules[type(response).__module__.partition(".")[0]]


def streamed_answer(
    send: Callable[[], Any],
    adapter: OpenAICompatible,
    assembly: StreamAssembly,
    deadline: datetime | None,
    on_chunk: Callable[[str], None],
    watch: Callable[[], None] | None,
) -> Answer:
    """Ask for a streamed answer (``send()``: the SDK's ``Stream``) and read it into ``assembly``,
    telling ``on_chunk`` of each chunk, under a ``Watchdog`` that halts it on what ``watch`` raises or
    at the deadline, from the moment the request is sent.

    A server that answered with one JSON body after all is read as such. A stream
    cut before its finish, or carrying an error, is ``invalid_response``; one that
    finished but is slow to end its body after ``[DONE]`` is taken as it is.
    """
    watchdog = Watchdog(deadline, watch)
    response = None
    try:
        response = watchdog.open(send).response
        if "text/event-stream" not in response.headers.get("content-type", ""):
            return adapter.read(response.read())
        assembly.opened = True
        _read_events(response, assembly, deadline, on_chunk)
    except Exception:
        if watchdog.reason is None:
            raise
    finally:
        watchdog.stop()  # before the connection can go back to the pool
        if response is not None:
            response.close()
    if watchdog.reason is not None:
        raise watchdog.reason
    return adapter.streamed(assembly)


def _read_events(
    response: Any, assembly: StreamAssembly, deadline: datetime | None, on_chunk: Callable[[str], None]
) -> None:
    """The stream's chunks into ``assembly``, each told to ``on_chunk``."""
    transport = _transport_of(response)
    done = False
    try:
        for data in _events(response):
            if data == "[DONE]":
                done = True
                continue  # read on to the body's end, so the connection goes back to the pool
            if seconds_left(deadline) <= 0:
                raise AIError("deadline")
            assembly.add(json.loads(data))
            try:
                on_chunk(assembly.text)
            except SoftTimeLimitExceeded:
                raise  # the task's deadline: journalled as such by ``complete``
            except Exception as reason:
                raise Interrupted(reason) from None
    except transport.TimeoutException:  # a read bounded by the deadline ends within a moment of it
        if not (done and assembly.finished):
            raise AIError("deadline" if seconds_left(deadline) < 1 else "request_timeout") from None
    except (transport.HTTPError, OSError, ValueError):  # cut off, or not JSON
        if not (done and assembly.finished):
            raise AIError("invalid_response") from None


def _events(response: Any) -> Iterator[str]:
    """The data of each server-sent event of ``response``, read to the end of its body.

    Read here rather than by the SDK's ``Stream``, which in recent versions stops at
    ``[DONE]`` and closes the connection with the body's last bytes unread, so every
    streamed call would open a new connection (and a new TLS handshake).
    """
    data: list[str] = []
    for line in _lines(response.iter_bytes()):
        if line:
            field, _colon, value = line.partition(":")
            if field == "data":
                data.append(value.removeprefix(" "))
        elif data:
            yield "\n".join(data)
            data = []
    if data:
        yield "\n".join(data)


def _lines(pieces: Iterable[bytes]) -> Iterator[str]:
    """The lines of a byte stream, split only where server-sent events split them (CR, LF, CRLF).

    Not ``str.splitlines``, which also splits at U+2028, U+0085 and others that a
    server may leave unescaped inside an event's JSON.
    """
    rest = b""
    for piece in pieces:
        lines = (rest + piece).splitlines(keepends=True)
        complete = bool(lines) and lines[-1].endswith(b"\n")  # a lone CR may be half of a CRLF
        rest = b"" if complete else lines.pop() if lines else b""
        for line in lines:
            yield line.rstrip(b"\r\n").decode()
    if rest:
        yield rest.rstrip(b"\r\n").decode()
