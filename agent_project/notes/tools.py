"""The demo's tools: built from its notes API (``api.py``), so the assistant reads and proposes
changes through the same views, permissions and validation as the user's own requests."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from agent.tools.drf import register_viewset

from .api import NoteViewSet

register_viewset(
    NoteViewSet,
    basename="notes",
    actions=["list", "retrieve", "create", "partial_update"],
    names={
        "list": "notes_search",
        "retrieve": "notes_read",
        "create": "notes_create",
        "partial_update": "notes_update",
    },
    descriptions={
        "list": "Search the user's notes by words in their title or text (search); no search lists them all.",
        "retrieve": "Read one of the user's notes in full, by its id (pk).",
        "create": "Create a note for the user. The user confirms it on a card before it is made.",
        "partial_update": "Rename a note or change its text, by its id (pk). The user confirms it on a card first.",
    },
    titles={
        "list": _("Search notes"),
        "retrieve": _("Read a note"),
        "create": _("Create a note"),
        "partial_update": _("Change a note"),
    },
)
