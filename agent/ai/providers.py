"""Provider adapters: what one kind of model server does its own way, in one class.

``complete()`` (``client.py``) keeps the journal, the retries and the deadline for every
provider. An adapter owns the rest: the request's body, a streamed answer put back
together, the answer's tokens and cost, the SDK's errors as the app's codes, and what a
refusal means (send the turn again without its pictures; untick streaming). The default,
``OpenAICompatible``, speaks to any OpenAI-compatible server; a site subclasses it for a
provider of its own and names the class on an endpoint (``Endpoint.adapter``) or for
every endpoint that names none (``AGENT["PROVIDER_ADAPTER"]``).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.conf import settings
from django.utils.module_loading import import_string

from ..core.conf import agent_settings
from ..models import Endpoint

logger = logging.getLogger(__name__)


class AIError(Exception):
    """A model call that did not give an answer; ``code`` is one of a ``model_failed`` notice's codes."""

    def __init__(
        self,
        code: str,
        status: int | None = None,
        *,
        request_id: Any = None,
        limit: str | None = None,
        refused: bool = False,
    ):
        super().__init__(code)
        self.code = code
        self.status = status
        self.request_id = request_id
        self.limit = limit
        self.refused = refused

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"code": self.code}
        if self.status is not None:
            params["status"] = self.status
        if self.limit is not None:
            params["limit"] = self.limit
        return params


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    """What an answer cost: its tokens, and dollars."""

    input_tokens: int
    output_tokens: int
    cost_usd: Decimal


@dataclass(frozen=True)
class Answer:
    """The model's answer as the app keeps it, whatever shape the provider sent it in."""

    content: str
    tool_calls: list[ToolCall]
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal


class StreamAssembly:
    """A streamed answer put back together, chunk by chunk: its text, tool calls, usage and model.

    Tool calls come in pieces keyed by their index: the id and name once, the arguments
    in parts. Nothing of them runs before the stream has ended.
    """

    def __init__(self) -> None:
        self.opened = False  # the server began to answer: the request was read, and is paid for
        self.text = ""
        self.calls: dict[int, dict[str, str]] = {}
        self.usage: dict[str, Any] = {}
        self.model = ""
        self.finished = False

    def add(self, chunk: Any) -> None:
        """Take one chunk (an event's JSON); a shape no OpenAI-compatible server sends, or an
        error in the stream, is ``invalid_response``."""
        if not isinstance(chunk, dict) or chunk.get("error"):
            raise AIError("invalid_response")
        try:
            self.model = str(chunk.get("model") or self.model)
            if chunk.get("usage"):
                self.usage = dict(chunk["usage"])
            for choice in chunk.get("choices") or []:
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if content:
                    if not isinstance(content, str):
                        raise TypeError("content")
                    self.text += content
                for part in delta.get("tool_calls") or []:
                    self._add_call(part)
                if choice.get("finish_reason"):
                    self.finished = True
        except (AttributeError, TypeError, ValueError):
            raise AIError("invalid_response") from None

    def _add_call(self, part: dict[str, Any]) -> None:
        call = self.calls.setdefault(int(part.get("index", len(self.calls))), {"id": "", "name": "", "arguments": ""})
        function = part.get("function") or {}
        call["id"] = call["id"] or str(part.get("id") or "")
        name = str(function.get("name") or "")
        if name != call["name"]:  # some servers repeat the whole name in every piece
            call["name"] += name
        call["arguments"] += str(function.get("arguments") or "")

    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall(**self.calls[index]) for index in sorted(self.calls)]


PICTURES_REFUSED = frozenset({400, 413, 415, 422})
"""A provider that refuses a request with pictures with one of these is asked again without them."""

STREAMING_REFUSED = frozenset({400, 422})
"""A provider that refuses a streamed request with one of these may still answer it whole."""


class OpenAICompatible:
    """Any server that speaks OpenAI's chat completions: the default adapter.

    A site's adapter subclasses it and overrides only what its provider does differently;
    it is made with the endpoint it calls (``self.endpoint``), once per call.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    # -- what the endpoint takes ---------------------------------------------------------

    def streams(self) -> bool:
        """Whether to ask for the answer as a stream, when the caller shows it as it comes."""
        return self.endpoint.supports_streaming

    def takes_tools(self) -> bool:
        return self.endpoint.supports_tools

    def sees_pictures(self) -> bool:
        """Whether the model takes images; one that does not is never sent any."""
        return self.endpoint.supports_images

    # -- the request ---------------------------------------------------------------------

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, stream: bool
    ) -> dict[str, Any]:
        """The body POSTed to ``/chat/completions``, sent as is."""
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": messages}
        if tools:
            body["tools"] = tools
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        return body

    # -- the answer ----------------------------------------------------------------------

    def assembly(self) -> StreamAssembly:
        """An empty assembly for a streamed answer; its ``add`` takes each event's JSON."""
        return StreamAssembly()

    def read(self, data: bytes) -> Answer:
        """A whole answer's body; anything unexpected in it is ``invalid_response``."""
        try:
            body = json.loads(data)
            message = body["choices"][0]["message"]
            calls = [
                ToolCall(
                    id=str(c.get("id") or ""),
                    name=str((c.get("function") or {}).get("name") or ""),
                    arguments=str((c.get("function") or {}).get("arguments") or ""),
                )
                for c in message.get("tool_calls") or []
            ]
            content = message.get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content")
            return self.answer(content, calls, body.get("usage") or {}, body.get("model"))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            raise AIError("invalid_response") from None

    def streamed(self, assembly: StreamAssembly) -> Answer:
        """A stream's answer once it ended; one cut before its finish is ``invalid_response``."""
        if not assembly.finished:
            raise AIError("invalid_response")
        try:
            return self.answer(assembly.text, assembly.tool_calls(), assembly.usage, assembly.model)
        except (TypeError, ValueError):
            raise AIError("invalid_response") from None

    def answer(self, content: str, calls: list[ToolCall], usage_data: dict[str, Any], model: Any) -> Answer:
        usage = self.usage(usage_data)
        return Answer(
            content=content,
            tool_calls=calls,
            model=str(model or self.endpoint.model),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usage.cost_usd,
        )

    def usage(self, usage_data: dict[str, Any]) -> Usage:
        """The tokens of an answer's ``usage``, and the provider's reported cost when it gives one,
        else the tokens at the endpoint's prices."""
        input_tokens = int(usage_data.get("prompt_tokens") or 0)
        output_tokens = int(usage_data.get("completion_tokens") or 0)
        reported = usage_data.get("cost")
        cost = Decimal(str(reported)) if reported is not None else self.price(input_tokens, output_tokens)
        return Usage(input_tokens, output_tokens, cost)

    def price(self, input_tokens: int, output_tokens: int) -> Decimal:
        """Tokens at the endpoint's prices (per million): also what an estimate of a cut stream costs."""
        endpoint = self.endpoint
        prices = (
            Decimal(input_tokens) * endpoint.input_price_per_mtok
            + Decimal(output_tokens) * endpoint.output_price_per_mtok
        )
        return prices / Decimal(1_000_000)

    # -- speech ----------------------------------------------------------------------------

    def transcription_request(self, audio: bytes, name: str) -> dict[str, Any]:
        """The arguments of the SDK's ``audio.transcriptions.create`` for one recording."""
        return {"model": self.endpoint.model, "file": (name, audio), "response_format": "json"}

    def transcript(self, result: Any) -> str:
        """The words of a transcription's answer; an answer without them is ``invalid_response``."""
        text = getattr(result, "text", None)
        if not isinstance(text, str):
            raise AIError("invalid_response")
        return text.strip()

    def transcribed_seconds(self, result: Any) -> float | None:
        """The speech's length as the server counted it, when it says (OpenAI's ``usage`` of type
        ``duration``, or ``duration`` as whisper servers give it)."""
        usage_data = getattr(result, "usage", None)
        for value in (getattr(usage_data, "seconds", None), getattr(result, "duration", None)):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return float(value)
        return None

    def audio_price(self, seconds: int) -> Decimal:
        """Speech at the endpoint's price per minute."""
        return self.endpoint.audio_price_per_minute * Decimal(seconds) / Decimal(60)

    # -- failures --------------------------------------------------------------------------

    def error(self, error: Exception) -> AIError:
        """The failure code for an exception of the ``openai`` SDK; the provider's text is never kept."""
        import openai

        if isinstance(error, openai.APITimeoutError):
            return AIError("request_timeout")
        if isinstance(error, openai.APIConnectionError):
            return AIError("connection_error")
        if isinstance(error, openai.APIResponseValidationError):
            return AIError("invalid_response")
        if isinstance(error, openai.APIStatusError):
            by_class = {
                openai.AuthenticationError: "invalid_api_key",
                openai.PermissionDeniedError: "api_key_forbidden",
                openai.NotFoundError: "model_not_found",
                openai.RateLimitError: "rate_limited",
            }
            for cls, code in by_class.items():
                if isinstance(error, cls):
                    return AIError(code, error.status_code)
            return AIError("api_error", error.status_code)
        logger.error("agent: a model call failed outside the SDK's errors", exc_info=error)
        return AIError("invalid_response")

    def refused_pictures(self, error: AIError) -> bool:
        """A first call with pictures that the provider refused as a request (not 404, not 5xx):
        the turn asks again without them."""
        return error.code == "api_error" and error.status in PICTURES_REFUSED

    def refused_streaming(self, error: AIError) -> bool:
        """A streamed call the provider refused as a request: the admin's test call then tries it whole."""
        return error.status in STREAMING_REFUSED


class Unimportable(OpenAICompatible):
    """Stands in for an adapter that cannot be imported: its calls are refused before they reach
    the network (``endpoint_not_configured``), journalled as any failed call."""

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, stream: bool
    ) -> dict[str, Any]:
        raise AIError("endpoint_not_configured")


def adapter_for(endpoint: Endpoint) -> OpenAICompatible:
    """The adapter of ``endpoint``: the class it names, else ``AGENT["PROVIDER_ADAPTER"]``."""
    path = endpoint.adapter or agent_settings.PROVIDER_ADAPTER
    found = adapter_class(path) if not endpoint.adapter or in_site_code(path) else None
    if found is None:
        logger.error("agent: the adapter %r of endpoint %s is not an importable adapter class", path, endpoint.pk)
        return Unimportable(endpoint)
    return found(endpoint)


def in_site_code(path: Any) -> bool:
    """Whether ``path`` may be imported to look for an adapter: it is in an installed app's package
    or the site's own (its settings' top package), or its module is imported already.

    An endpoint's adapter is staff's data: a path elsewhere (``antigravity.X``) is refused
    without running its module's code."""
    if not isinstance(path, str) or "." not in path:
        return False
    module = path.rpartition(".")[0]
    if module in sys.modules:
        return True
    site_packages = {config.name for config in apps.get_app_configs()}
    own = (getattr(settings, "SETTINGS_MODULE", None), getattr(settings, "ROOT_URLCONF", None))
    site_packages |= {name.partition(".")[0] for name in own if isinstance(name, str) and name}
    return any(module == package or module.startswith(package + ".") for package in site_packages)


def adapter_class(path: Any) -> type[OpenAICompatible] | None:
    """The adapter class at the dotted ``path``: a subclass of ``OpenAICompatible``; None when it is not one."""
    try:
        found = import_string(path)
    except Exception:  # not a path, no such module or name, or a module that fails as it is imported
        return None
    return found if isinstance(found, type) and issubclass(found, OpenAICompatible) else None
