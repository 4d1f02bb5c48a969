"""``complete()``: one model call, one journal row, every SDK error mapped to a code.

The call's journal, its retries and its deadline are kept here for every provider; what a
provider does its own way (the request, the answer's shape, its usage, its errors) is its
adapter's (``providers``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection
from django.utils import timezone

from .. import pooled
from ..conf import agent_settings
from ..limits import costs
from ..models import AIRequest, Endpoint
from . import endpoints, usage
from .providers import AIError, Answer, OpenAICompatible, StreamAssembly, Usage, adapter_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion(Answer):
    """The answer with how long it took and its journal row."""

    latency_ms: int
    request_id: Any


def effective_endpoint(user: Any) -> Endpoint | None:
    """The user's own endpoint when it is usable, else the site default (``endpoints.effective`` says why)."""
    return endpoints.effective(user).endpoint


_clients: dict[Any, tuple[tuple[Any, ...], Any]] = {}
_clients_lock = threading.Lock()


def client_for(endpoint: Endpoint) -> Any:
    """One ``openai.OpenAI`` per endpoint per process (its connection pool is reused), shared by the
    worker's threads.

    An endpoint edited in the admin gets a new client; the old one closes its connections once no
    call uses it any more (the SDK closes a client it collects): a turn of another thread may still
    be reading its answer from it.
    """
    import openai

    key = _api_key(endpoint)
    config = (endpoint.base_url, endpoint.timeout_s, key)
    with _clients_lock:
        known = _clients.get(endpoint.pk)
        if known is not None and known[0] == config:
            return known[1]
        client = openai.OpenAI(
            api_key=key or "unused",
            base_url=endpoint.base_url,
            timeout=float(endpoint.timeout_s),
            max_retries=0,  # ``_create`` retries, within the deadline
        )
        _clients[endpoint.pk] = (config, client)
    return client


def _api_key(endpoint: Endpoint) -> str:
    """The stored key, else the one in the endpoint's variable; a variable the site does not allow
    is never read, and the call is refused before it reaches the network."""
    if endpoint.api_key:
        return endpoint.api_key
    if endpoint.api_key_env:
        if not endpoints.key_env_allowed(endpoint.api_key_env):
            raise AIError("endpoint_not_configured")
        return os.environ.get(endpoint.api_key_env, "")
    return ""


def complete(
    endpoint: Endpoint | None,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    user: Any,
    source: str,
    task: str,
    admission: str | None = None,
    attribution: dict[str, Any] | None = None,
    capture: bool = False,
    deadline: datetime | None = None,
    budget: costs.Verdict | None = None,
    on_chunk: Callable[[str], None] | None = None,
    watch: Callable[[], None] | None = None,
) -> Completion:
    """Call the model once; the journal row is written before this returns or raises.

    ``messages`` and ``tools`` must be plain JSON: they go to the SDK as
    ``extra_body``, which it sends as is (its per-message transform is slow).
    With a ``deadline``, every attempt and every wait between retries ends by it: a call
    it cuts is ``AIError("deadline")``, journalled as such. With an ``admission``, the cost caps
    are checked first, or taken from ``budget`` when the caller checked them just now.

    With ``on_chunk``, an endpoint whose adapter streams (``supports_streaming``) is asked to: each chunk
    calls it with the answer's text so far, and whatever it raises ends the call (journalled
    as ``interrupted``) and reaches the caller as it was raised, its ``request_id`` set to the
    journal row's (so the caller can link what it keeps of the answer). While a stream is read, a
    watchdog thread calls ``watch`` about every ``WATCH_EVERY_S`` and looks at the deadline,
    from the moment the request is sent, so also while the model has not answered at all, and
    while it sends nothing: what ``watch`` raises ends the call as ``on_chunk``'s
    would, and the deadline as ``AIError("deadline")``, each within a moment, the connection cut.
    """
    journal = {
        "endpoint": endpoint if endpoint is not None and endpoint.pk else None,
        "user": user,
        "source": source,
        "task": task,
        "admission": admission or "",
        "attribution": attribution or {},
        "model": getattr(endpoint, "model", "") or "",
        "tools_offered": len(tools or ()),
        "tools_bytes": len(json.dumps(tools)) if tools else 0,  # as the runner's budget counts them
    }
    if endpoint is None:
        raise journal_failure(journal, AIError("endpoint_not_configured"))
    if not endpoint.enabled:
        raise journal_failure(journal, AIError("endpoint_disabled"))
    if admission is not None:
        limit = budget.limit if budget is not None else costs.limit_reached(user)
        if limit is not None:
            row = AIRequest.objects.create(**journal, status=AIRequest.Status.REFUSED, error_code="budget_exceeded")
            raise AIError("budget_exceeded", request_id=row.pk, limit=limit, refused=True)
    adapter = adapter_for(endpoint)
    started = time.monotonic()
    assembly = adapter.assembly()
    pooled.give_back()  # the model's wait holds no database connection
    try:
        stream = on_chunk is not None and adapter.streams()
        body = adapter.request(messages, tools, stream=stream)
        if on_chunk is not None and stream:
            completion = _streamed(endpoint, body, assembly, adapter, started, deadline, on_chunk, watch)
        else:
            completion = _read(_create(endpoint, body, deadline), adapter, started)
    except Interrupted as interrupted:
        code = "deadline" if _seconds_left(deadline) <= 0 else "interrupted"
        failed = journal_failure(journal, AIError(code), started, _spent(adapter, messages, assembly))
        interrupted.reason.request_id = failed.request_id  # type: ignore[attr-defined]
        raise interrupted.reason from None
    except AIError as error:
        raise journal_failure(journal, error, started, _spent(adapter, messages, assembly)) from None
    except SoftTimeLimitExceeded:  # the task's own deadline, landing inside the call
        journal_failure(journal, AIError("deadline"), started, _spent(adapter, messages, assembly))
        raise
    except Exception as error:  # every SDK error becomes a code; provider text is never kept
        raise journal_failure(journal, adapter.error(error), started) from None
    row = AIRequest.objects.create(
        **journal | {"model": completion.model or journal["model"]},
        status=AIRequest.Status.SUCCESS,
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        cost_usd=completion.cost_usd,
        latency_ms=completion.latency_ms,
        captured={"messages": messages, "answer": completion.content} if capture else None,
    )
    usage.deliver(row)
    return Completion(**{**completion.__dict__, "request_id": row.pk})


_RETRYABLE_STATUS = {408, 409, 429}


def _create(endpoint: Endpoint, body: dict[str, Any], deadline: datetime | None, *, stream: bool = False) -> Any:
    """The adapter's request, tried again on the errors the SDK would retry, never past ``deadline``.

    The SDK's own retries are off: they wait as long as a server's Retry-After asks (up to two
    minutes), which no turn's deadline can bound.
    """
    import openai

    client = client_for(endpoint)
    retries = agent_settings.MODEL_MAX_RETRIES
    attempt = 0
    while True:
        timeout = min(float(endpoint.timeout_s), _seconds_left(deadline))
        if timeout <= 0:
            raise AIError("deadline")
        try:
            # The client's own POST, its body sent as is and the answer read as JSON here: the typed
            # ``chat.completions.create`` would transform the parameters and build models of the answer.
            # A stream's events come as plain dicts (``cast_to=object``) for the same reason.
            streamed = {"stream": True, "stream_cls": openai.Stream[object]} if stream else {}
            return client.post(
                "/chat/completions",
                body=body,
                cast_to=object if streamed else bytes,
                options={"timeout": timeout},
                **streamed,
            )
        except openai.APITimeoutError as error:
            if timeout < endpoint.timeout_s:
                raise AIError("deadline") from None
            failure: Exception = error
        except openai.APIStatusError as error:
            if error.status_code not in _RETRYABLE_STATUS and error.status_code < 500:
                raise
            failure = error
        except openai.APIConnectionError as error:
            failure = error
        pause = min(0.5 * 2**attempt, 8.0)
        if attempt >= retries or pause >= _seconds_left(deadline):
            raise failure
        time.sleep(pause)
        attempt += 1


def _seconds_left(deadline: datetime | None) -> float:
    if deadline is None:
        return float("inf")
    return (deadline - timezone.now()).total_seconds()


def journal_failure(
    journal: dict[str, Any], error: AIError, started: float | None = None, spent: dict[str, Any] | None = None
) -> AIError:
    """The failed call's journal row, delivered to the usage sinks; ``error`` carries the row's id."""
    latency = int((time.monotonic() - started) * 1000) if started is not None else 0
    row = AIRequest.objects.create(
        **journal,
        **(spent or {}),
        status=AIRequest.Status.ERROR,
        error_code=error.code,
        http_status=error.status,
        latency_ms=latency,
    )
    usage.deliver(row)
    error.request_id = row.pk
    return error


class Interrupted(Exception):
    """What ``on_chunk`` raised, carried out of the stream to be raised again once journalled."""

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
        if _seconds_left(self.deadline) <= 0:
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
    """The socket a streamed response is read from, when the transport tells."""
    network = (getattr(response, "extensions", None) or {}).get("network_stream")
    try:
        return network.get_extra_info("socket") if network is not None else None
    except Exception:
        return None


def _streamed(
    endpoint: Endpoint,
    body: dict[str, Any],
    assembly: StreamAssembly,
    adapter: OpenAICompatible,
    started: float,
    deadline: datetime | None,
    on_chunk: Callable[[str], None],
    watch: Callable[[], None] | None,
) -> Completion:
    """Ask for a streamed answer and read it into ``assembly``, telling ``on_chunk`` of each chunk,
    under a ``Watchdog`` that halts it on what ``watch`` raises or at the deadline, from the moment
    the request is sent.

    A server that answered with one JSON body after all is read as such. A stream
    cut before its finish, or carrying an error, is ``invalid_response``; one that
    finished but is slow to end its body after ``[DONE]`` is taken as it is.
    """
    watchdog = Watchdog(deadline, watch)
    response = None
    try:
        response = watchdog.open(lambda: _create(endpoint, body, deadline, stream=True)).response
        if "text/event-stream" not in response.headers.get("content-type", ""):
            return _read(response.read(), adapter, started)
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
    return _completion(adapter.streamed(assembly), started)


def _read_events(
    response: Any, assembly: StreamAssembly, deadline: datetime | None, on_chunk: Callable[[str], None]
) -> None:
    """The stream's chunks into ``assembly``, each told to ``on_chunk``."""
    transport = sys.modules[type(response).__module__.partition(".")[0]]  # httpx, or httpx2 in newer SDKs
    done = False
    try:
        for data in _events(response):
            if data == "[DONE]":
                done = True
                continue  # read on to the body's end, so the connection goes back to the pool
            if _seconds_left(deadline) <= 0:
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
            raise AIError("deadline" if _seconds_left(deadline) < 1 else "request_timeout") from None
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


CHARS_PER_TOKEN = 4


def _spent(adapter: OpenAICompatible, messages: list[dict[str, Any]], assembly: StreamAssembly) -> dict[str, Any]:
    """What a stream that ended early cost, for its journal row, so a stopped answer still counts
    against the caps: its usage if that came, else an estimate at ``CHARS_PER_TOKEN`` of the
    request's text and of what came of the answer, at the endpoint's prices. Nothing for a
    request never answered."""
    if not assembly.opened:
        return {}
    try:
        if assembly.usage:
            return asdict(adapter.usage(assembly.usage))
        input_tokens = sum(len(text) for text in _texts(messages)) // CHARS_PER_TOKEN
        answered = len(assembly.text) + sum(len(call.arguments) for call in assembly.tool_calls())
        output_tokens = answered // CHARS_PER_TOKEN
        return asdict(Usage(input_tokens, output_tokens, adapter.price(input_tokens, output_tokens)))
    except (ArithmeticError, TypeError, ValueError):  # a usage no server sends: the failure is journalled as is
        return {}


def _texts(messages: list[dict[str, Any]]) -> Iterator[str]:
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):  # parts: a picture's are not text
            yield from (p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text")
        for call in message.get("tool_calls") or []:
            yield str((call.get("function") or {}).get("arguments") or "")


def _read(response: bytes, adapter: OpenAICompatible, started: float) -> Completion:
    """A whole answer's body, read by the adapter, as a ``Completion``."""
    return _completion(adapter.read(response), started)


def _completion(answer: Answer, started: float) -> Completion:
    """The answer with its latency."""
    latency = int((time.monotonic() - started) * 1000)
    return Completion(**vars(answer), latency_ms=latency, request_id=None)
