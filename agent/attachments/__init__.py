"""Attachments (SPEC §9): the user's files in a chat, read once, safely.

``api`` is the door (add, remove, list, what a client sees, the turn's files);
``extraction`` reads a file once in ``agent.process_attachment``; ``parsers``
runs the format parsers in a child process bounded in time and memory;
``pictures`` builds the model's image parts; ``lifecycle`` removes stored files.
"""

from .api import (
    add_attachment,
    client_view,
    for_turn,
    link,
    list_unlinked,
    message_files,
    open_file,
    remove_attachment,
)

__all__ = [
    "add_attachment",
    "client_view",
    "for_turn",
    "link",
    "list_unlinked",
    "message_files",
    "open_file",
    "remove_attachment",
]
