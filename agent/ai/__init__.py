"""Model calls through the official ``openai`` client."""

from .client import AIError, Completion, ToolCall, complete, effective_endpoint
from .endpoints import Choice, effective

__all__ = ["AIError", "Choice", "Completion", "ToolCall", "complete", "effective", "effective_endpoint"]
