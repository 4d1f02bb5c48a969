"""What a client sees of chats, messages and files: never a tool's arguments or results, never a file's text."""

from __future__ import annotations

from typing import Any, Iterable

from django.db.models import Q

from ..core.errors import file_failure_message
from ..core.ids import MessageId
from ..models import Attachment, Conversation, Message


def conversation_view(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": str(conversation.id),
        "title": conversation.title,
        "status": conversation.status,
        "message_count": conversation.message_count,
        "last_message_at": conversation.last_message_at.isoformat(),
        "created_at": conversation.created_at.isoformat(),
    }


def client_views(messages: Iterable[Message], *, versions: bool = False) -> list[dict[str, Any]]:
    """Client views of messages; a user's message also lists its files (the page's chips), read in one query.

    A row whose own query says it has none (``agent_has_files`` false) is left out of that query,
    which is then not made at all for a message without files. With ``versions`` (the chat has
    some), each message's ``versions`` are read too, in one more query; a chat that never had one
    costs nothing for them."""
    rows = list(messages)
    views = [client_view(m) for m in rows]
    asked = [view for view in views if view["role"] == Message.Role.USER]
    with_files = [
        view
        for row, view in zip(rows, views, strict=True)
        if view["role"] == Message.Role.USER and _may_have_files(row)
    ]
    files = message_files(view["id"] for view in with_files) if with_files else {}
    for view in asked:
        view["files"] = files.get(view["id"], [])
    if versions and rows:
        siblings = _siblings(rows)
        for row, view in zip(rows, views, strict=True):
            view["versions"] = versions_view(row.pk, siblings.get(row.parent_id, []))
    return views


def _may_have_files(row: Message) -> bool:
    return bool(getattr(row, "agent_has_files", True))


def _siblings(rows: list[Message]) -> dict[Any, list[Any]]:
    """The children of each message's parent (``None``: the chat's first messages), oldest first."""
    parents = {row.parent_id for row in rows}
    near = Q(parent_id__in=[p for p in parents if p is not None])
    if None in parents:
        near |= Q(parent__isnull=True)
    grouped: dict[Any, list[Any]] = {}
    qs = Message.objects.filter(near, conversation_id=rows[0].conversation_id).order_by("seq")
    for parent, pk in qs.values_list("parent_id", "id"):
        grouped.setdefault(parent, []).append(pk)
    return grouped


def versions_view(message_id: MessageId, siblings: list[Any]) -> dict[str, Any] | None:
    """``{"index", "count", "siblings"}`` of a message with versions (``index`` counts from 1), else None."""
    if len(siblings) < 2 or message_id not in siblings:
        return None
    return {"index": siblings.index(message_id) + 1, "count": len(siblings), "siblings": [str(s) for s in siblings]}


def message_files(message_ids: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """The files of each message, as clients see them, in one query."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    rows = Attachment.objects.filter(message_id__in=list(message_ids)).defer("text").order_by("created_at", "id")
    for row in rows:
        grouped.setdefault(str(row.message_id), []).append(file_view(row))
    return grouped


def file_view(attachment: Attachment) -> dict[str, Any]:
    """What a client sees of a file: never its text."""
    return {
        "id": str(attachment.pk),
        "name": attachment.name,
        "size": attachment.size,
        "content_type": attachment.content_type,
        "status": attachment.status,
        "error_code": attachment.error_code or None,
        "error_message": file_failure_message(attachment.error_code) if attachment.error_code else None,
        "is_picture": attachment.is_picture,
    }


def client_view(message: Message) -> dict[str, Any]:
    """A message as a client may see it: never a tool's result or arguments."""
    view: dict[str, Any] = {
        "id": str(message.id),
        "conversation": str(message.conversation_id),
        "seq": message.seq,
        "role": message.role,
        "turn": str(message.turn_id) if message.turn_id else None,
        "content": message.content,
        "partial": message.partial,
        "spoken": message.spoken,
        "created_at": message.created_at.isoformat(),
        "notice_code": message.notice_code or None,
        "notice_params": message.notice_params or {},
        "tool_calls": [{"id": c.get("id"), "name": c.get("name")} for c in (message.tool_calls or [])] or None,
        "tool_name": message.tool_name or None,
        "tool_outcome": message.tool_outcome or None,
        "tool_result": None,
        "tool_summary": tool_summary(message) if message.role == Message.Role.TOOL else None,
        "confirmation": None,
        "active": message.active,
        "versions": None,
    }
    confirmation = message.confirmation if message.confirmation_id else None
    if confirmation is not None and message.role == Message.Role.TOOL:
        view["confirmation"] = {
            "id": str(confirmation.id),
            "status": confirmation.status,
            "preview": _as_run(confirmation.preview, confirmation.edits),
            "expires_at": confirmation.expires_at.isoformat(),
            "edited": bool(confirmation.edits),
        }
    elif confirmation is not None:  # a card's outcome: with the values it ran with, when the user changed some
        view["confirmation"] = {
            "id": str(confirmation.id),
            "status": confirmation.status,
            "edited": bool(confirmation.edits),
        }
        if confirmation.edits:
            view["confirmation"]["preview"] = _as_run(confirmation.preview, confirmation.edits)
    return view


def _as_run(preview: Any, edits: Any) -> Any:
    """The card's preview with the user's edits in it: what the write ran with."""
    if not edits or not isinstance(preview, dict) or not isinstance(preview.get("fields"), list):
        return preview
    fields = [
        {**f, "value": edits[f["name"]]} if isinstance(f, dict) and f.get("name") in edits else f
        for f in preview["fields"]
    ]
    return {**preview, "fields": fields}


def tool_summary(message: Message) -> dict[str, Any]:
    return {
        "name": message.tool_name or None,
        "outcome": message.tool_outcome or None,
        "count": result_count(message.tool_result),
        "truncated": bool(message.tool_result_truncated),
    }


def result_count(result: Any) -> int | None:
    """How many items a tool found: its one list, or its ``count``/``total``."""
    if isinstance(result, list):
        return len(result)
    if not isinstance(result, dict):
        return None
    for key in ("count", "total"):
        value = result.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    lists = [v for v in result.values() if isinstance(v, list)]
    return len(lists[0]) if len(lists) == 1 else None
