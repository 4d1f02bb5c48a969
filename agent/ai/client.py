"""``complete()``: one model call, one journal row, every SDK error mapped to a code.

The call's journal, its retries and its deadline are kept here for every provider; what a
provider does its own way (the request, the answer's shape, its usage, its errors) is its
adapter's (``providers``); reading a streamed answer, under the watchdog that cuts it, is
``streaming``'s.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial
from typing import Any, Callable, Iterator

from celery.exceptions import SoftTimeLimitExceeded

from ..core import pooled
from ..core.conf import agent_settings
from ..limits import costs
from ..models import AIRequest, Endpoint
from . import endpoints, usage
from .providers import AIError, Answer, OpenAICompatible, StreamAssembly, Usage, adapter_for
from .streaming import Interrupted, seconds_left, streamed_answer

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
    watchdog thread calls ``watch`` about every ``streaming.WATCH_EVERY_S`` and looks at the deadline,
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
            send = partial(_create, endpoint, body, deadline, stream=True)
            answer = streamed_answer(send, adapter, assembly, deadline, on_chunk, watch)
        else:
            answer = adapter.read(_create(endpoint, body, deadline))
        completion = _completion(answer, started)
    except Interrupted as interrupted:
        code = "deadline" if seconds_left(deadline) <= 0 else "interrupted"
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
        timeout = min(float(endpoint.timeout_s), seconds_left(deadline))
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
        if attempt >= retries or pause >= seconds_left(deadline):
            raise failure
        time.sleep(pause)
        attempt += 1


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


def _completion(answer: Answer, started: float) -> Completion:
    """The answer with its latency."""
    latency = int((time.monotonic() - started) * 1000)
    return Completion(**vars(answer), latency_ms=latency, request_id=None)
