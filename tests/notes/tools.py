"""The test site's tools: notes read and written through the assistant, and a slow read for fault tests."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from agent.tools import agent_tool

from .models import Note

OBJECT = {"type": "object", "additionalProperties": False}


@agent_tool(
    name="notes_search",
    permission="notes.view_note",
    description="Search the user's notes by title.",
    title=_("Search notes"),
    parameters={**OBJECT, "properties": {"query": {"type": "string", "maxLength": 200}}},
)
def notes_search(ctx: Any, query: str = "") -> dict[str, Any]:
    found = [{"id": n.pk, "title": n.title} for n in Note.objects.filter(owner=ctx.user, title__icontains=query)[:20]]
    return {"notes": found, "count": len(found)}


@agent_tool(
    name="notes_read",
    permission="notes.view_note",
    description="Read one note by its id.",
    title=_("Read a note"),
    parameters={**OBJECT, "properties": {"note_id": {"type": "integer", "minimum": 1}}, "required": ["note_id"]},
)
def notes_read(ctx: Any, note_id: int) -> dict[str, Any]:
    note = Note.objects.filter(owner=ctx.user, pk=note_id).first()
    return {"id": note.pk, "title": note.title, "body": note.body} if note else {"error": "not_found"}


@agent_tool(
    name="notes_wait",
    permission="notes.view_note",
    description="A read that takes the given seconds.",
    parameters={**OBJECT, "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 30}}},
)
def notes_wait(ctx: Any, seconds: float = 0) -> dict[str, Any]:
    time.sleep(seconds)
    return {"waited": seconds}


@agent_tool(
    name="notes_create",
    kind="write",
    module="notes",
    permission="notes.add_note",
    description="Create a note; the user confirms it on a card first.",
    title=_("Create a note"),
    labels={"title": _("Title"), "body": _("Text")},
    preview=lambda ctx, title, body="": {"title": title, "body": body},
    parameters={
        **OBJECT,
        "required": ["title"],
        "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 200}, "body": {"type": "string"}},
    },
)
def notes_create(ctx: Any, title: str, body: str = "") -> dict[str, Any]:
    return {"id": Note.objects.create(owner=ctx.user, title=title, body=body).pk}


def _current_text(ctx: Any, note_id: int, body: str) -> str:
    note = Note.objects.filter(owner=ctx.user, pk=note_id).values_list("title", "body").first()
    return hashlib.sha256(repr(note).encode()).hexdigest()


@agent_tool(
    name="notes_update",
    kind="write",
    module="notes",
    permission="notes.change_note",
    description="Replace a note's text; the user confirms it on a card first.",
    title=_("Change a note"),
    labels={"body": _("New text")},
    preview=lambda ctx, note_id, body: {"body": body},
    fingerprint=_current_text,
    parameters={
        **OBJECT,
        "required": ["note_id", "body"],
        "properties": {"note_id": {"type": "integer", "minimum": 1}, "body": {"type": "string"}},
    },
)
def notes_update(ctx: Any, note_id: int, body: str) -> dict[str, Any]:
    if not Note.objects.filter(owner=ctx.user, pk=note_id).update(body=body):
        raise Note.DoesNotExist()
    return {"id": note_id}


def _no_shouting(ctx: Any, note_id: int, title: str) -> None:
    if title.isupper():
        raise ValidationError({"title": "A title may not be all capitals."})


def _retitle_preview(ctx: Any, note_id: int, title: str) -> dict[str, Any]:
    """The note's current title beside the new one, which the user may change on the card."""
    current = Note.objects.filter(owner=ctx.user, pk=note_id).values_list("title", flat=True).first()
    return {
        "fields": [
            {"name": "note_id", "label": "Note", "value": note_id, "editable": False},
            {"name": "title", "label": "Title", "value": title, "old": current, "editable": True, "type": "text"},
        ]
    }


@agent_tool(
    name="notes_retitle",
    kind="write",
    module="notes",
    permission="notes.change_note",
    description="Give a note a new title; the user confirms it on a card first and may change the title there.",
    title=_("Rename a note"),
    preview=_retitle_preview,
    validate=_no_shouting,
    parameters={
        **OBJECT,
        "required": ["note_id", "title"],
        "properties": {"note_id": {"type": "integer", "minimum": 1}, "title": {"type": "string", "maxLength": 200}},
    },
)
def notes_retitle(ctx: Any, note_id: int, title: str) -> dict[str, Any]:
    if not Note.objects.filter(owner=ctx.user, pk=note_id).update(title=title):
        raise Note.DoesNotExist()
    return {"id": note_id}
