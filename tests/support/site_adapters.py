"""Adapters as a site writes them, named by their dotted paths in the provider seam's tests."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from agent.ai.providers import OpenAICompatible, Usage

TAG = "site-tag"


class Tagged(OpenAICompatible):
    """A provider that wants every request tagged, and bills in a usage field of its own."""

    def request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, stream: bool) -> dict:
        return {**super().request(messages, tools, stream=stream), "user": TAG}

    def usage(self, usage_data: dict[str, Any]) -> Usage:
        used = super().usage(usage_data)
        billed = usage_data.get("billed_microdollars")
        if billed is None:
            return used
        return Usage(used.input_tokens, used.output_tokens, Decimal(billed) / Decimal(1_000_000))


class NoTools(OpenAICompatible):
    """A provider whose models take no tools, whatever the endpoint's tick says."""

    def takes_tools(self) -> bool:
        return False


class NotAnAdapter:
    """Importable, but no adapter."""
