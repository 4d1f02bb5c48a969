"""Turns: start one, stop one (``starting``), or one on a new version of a message (``versions``).
The rounds are ``agent.turns.runner``'s, their writes and checks ``agent.turns.fenced``'s."""

from .starting import Branch, live_turn, start, stop
from .versions import edit_message, regenerate, switch_version

__all__ = ["Branch", "edit_message", "live_turn", "regenerate", "start", "stop", "switch_version"]
