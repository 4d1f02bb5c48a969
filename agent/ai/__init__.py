"""Model calls through the official ``openai`` client."""

from .client import Completion, complete, effective_endpoint
from .endpoints import Choice, effective
from .providers import AIError, ToolCall

__all__ = ["AIError", "Choice", "Completion", "ToolCall", "complete", "effective", "effective_endpoint"]
