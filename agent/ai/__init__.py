"""Model calls through the official ``openai`` client (SPEC §8)."""
from .client import AIError, Completion, ToolCall, complete, effective_endpoint

__all__ = ["AIError", "Completion", "ToolCall", "complete", "effective_endpoint"]
