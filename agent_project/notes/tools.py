"""The demo's tools: the assistant searches and reads a user's notes, and proposes changes."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from agent.tools import agent_tool

from .models import Note


@agent_tool(
    name="notes_search",
    title=_("Search notes"),
    description="Search the user's notes by words in their title or text. An empty query lists the newest.",
    permission="notes.view_note",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "maxLength": 200}},
        "additionalProperties": False,
    },
)
def notes_search(ctx: Any, query: str = "") -> dict[str, Any]:
    matches = Q()
    for word in query.split():
        matches &= Q(title__icontains=word) | Q(body__icontains=word)
    notes = Note.objects.filter(matches, owner=ctx.user)[:20]
    found = [{"id": n.pk, "title": n.title, "updated_at": n.updated_at.isoformat()} for n in notes]
    return {"notes": found, "count": len(found)}


@agent_tool(
    name="notes_read",
    title=_("Read a note"),
    description="Read one of the user's notes in full, by its id.",
    permission="notes.view_note",
    parameters={
        "type": "object",
        "properties": {"note_id": {"type": "integer", "minimum": 1}},
        "required": ["note_id"],
        "additionalProperties": False,
    },
)
def notes_read(ctx: Any, note_id: int) -> dict[str, Any]:
    note = Note.objects.filter(owner=ctx.user, pk=note_id).first()
    if note is None:
        return {"error": "not_found"}
    return {"id": note.pk, "title": note.title, "body": note.body}


def _create_preview(ctx: Any, title: str, body: str = "") -> dict[str, Any]:
    return {"title": title, "body": body}


@agent_tool(
    name="notes_create",
    title=_("Create a note"),
    labels={"title": _("Title"), "body": _("Text")},
    kind="write",
    module="notes",
    description="Create a note for the user. The user confirms it on a card before it is made.",
    permission="notes.add_note",
    preview=_create_preview,
    parameters={
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 200},
            "body": {"type": "string", "maxLength": 10000},
        },
        "required": ["title"],
        "additionalProperties": False,
    },
)
def notes_create(ctx: Any, title: str, body: str = "") -> dict[str, Any]:
    note = Note.objects.create(owner=ctx.user, title=title, body=body)
    return {"id": note.pk}


def _update_preview(ctx: Any, note_id: int, body: str) -> dict[str, Any]:
    note = Note.objects.filter(owner=ctx.user, pk=note_id).first()
    return {"title": note.title if note else "?", "body": body}


def _update_fingerprint(ctx: Any, note_id: int, body: str) -> str:
    note = Note.objects.filter(owner=ctx.user, pk=note_id).values_list("title", "body").first()
    return hashlib.sha256(repr(note).encode()).hexdigest()


@agent_tool(
    name="notes_update",
    title=_("Change a note"),
    labels={"title": _("Note"), "body": _("New text")},
    kind="write",
    module="notes",
    description="Replace the text of one of the user's notes. The user confirms it on a card first.",
    permission="notes.change_note",
    preview=_update_preview,
    fingerprint=_update_fingerprint,
    parameters={
        "type": "object",
        "properties": {"note_id": {"type": "integer", "minimum": 1}, "body": {"type": "string", "maxLength": 10000}},
        "required": ["note_id", "body"],
        "additionalProperties": False,
    },
)
def notes_update(ctx: Any, note_id: int, body: str) -> dict[str, Any]:
    updated = Note.objects.filter(owner=ctx.user, pk=note_id).update(body=body)
    if not updated:
        raise Note.DoesNotExist()
    return {"id": note_id}
