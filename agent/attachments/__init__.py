"""Attachments: the user's files in a chat, read once, safely.

``api`` is the door (add, remove, list, the turn's files); ``client_view`` (what a
client sees of a file) is ``agent.conversations.file_view``, as it goes with the message;
``extraction`` reads a file once in ``agent.process_attachment``; ``parsers``
runs the format parsers in a child process bounded in time and memory;
``pictures`` builds the model's image parts; ``lifecycle`` removes stored files.
"""

from ..conversations import file_view as client_view
from .api import add_attachment, for_turn, link, list_unlinked, open_file, remove_attachment

__all__ = [
    "add_attachment",
    "client_view",
    "for_turn",
    "link",
    "list_unlinked",
    "open_file",
    "remove_attachment",
]
