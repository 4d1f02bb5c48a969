"""What a turn shows the model of the chat so far.

Kept: the user's messages and the final answers of earlier turns, and each
card as a fixed phrase (its outcome, or "waiting"); a write confirmed since the
user's last message brings what it returned (the view's answer, the saved
object's key), so the model can go on from it. Left out: tool calls and
results of earlier turns, older writes' answers and other notices: after a loss
of rights the model must not see old data. Only the chat's active line is read: other versions of a
message are not what the user now means. The window is filled from the newest back.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Length, Substr
from django.utils.translation import gettext as _

from ..core.ids import ConfirmationId, ConversationId
from ..models import Attachment, Confirmation, Message

PAGE = 200

_OUTCOME_PHRASES = {
    "done": lambda tool: _("[confirmation] done: %(tool)s") % {"tool": tool},
    "cancelled": lambda tool: _("[confirmation] cancelled: %(tool)s") % {"tool": tool},
    "expired": lambda tool: _("[confirmation] expired: %(tool)s") % {"tool": tool},
    "stale": lambda tool: _("[confirmation] the data changed: %(tool)s") % {"tool": tool},
    "failed": lambda tool: _("[confirmation] failed: %(tool)s") % {"tool": tool},
    "waiting": lambda tool: _("[confirmation] waiting: %(tool)s") % {"tool": tool},
}


def confirmation_phrase(tool_name: Any, outcome: str, edits: Any = None, result: str = "") -> str | None:
    """The fixed phrase for a card's outcome (or ``"waiting"``), in the active language.

    A card the user edited before it was done says so, with the values the write ran with: the
    model must not take its own proposal for what happened. ``result`` (a done write's answer,
    as JSON text) follows on a line of its own.
    """
    phrase = _OUTCOME_PHRASES.get(outcome)
    if phrase is None or not isinstance(tool_name, str) or not tool_name:
        return None
    if outcome == "done" and isinstance(edits, dict) and edits:
        edited = json.dumps(edits, ensure_ascii=False, sort_keys=True, default=str)
        said = _("[confirmation] done, edited by the user: %(tool)s %(edits)s") % {"tool": tool_name, "edits": edited}
    else:
        said = phrase(tool_name)
    if outcome == "done" and result:
        said += "\n" + _("It returned: %(result)s") % {"result": result}
    return said


def build(
    messages: Sequence[Message], attachments: Iterable[Any], current: dict[str, Any], limit: int
) -> list[dict[str, Any]]:
    """The model messages: earlier ones that fit in ``limit``, then ``current`` (always kept)."""
    return _assemble(reversed(list(messages)), _by_message(attachments), current, limit)


def load(
    conversation_id: ConversationId,
    current: dict[str, Any],
    limit: int,
    *,
    before_seq: int | None = None,
    attachments: Iterable[Any] = (),
) -> list[dict[str, Any]]:
    """``build`` over the chat in the database, read backwards in pages up to the window's end."""
    files = _by_message(attachments)
    return _assemble(_newest_first(conversation_id, before_seq, files, limit), files, current, limit)


def user_content(text: str, attachments: Sequence[Any], limit: int) -> str:
    """The user's text, then each file: its text cut to its share of ``limit``, or a line naming a picture.

    An attachment is anything with ``name``, ``is_picture``, ``text`` and
    ``text_complete`` (False when extraction already cut it); ``text_length``,
    when given, is the length of the whole stored text that ``text`` begins.
    A file shown in part ends with a line that says so, so the model never
    takes part of the data for all of it.
    """
    if not attachments:
        return text
    parts = [text]
    texts = [a for a in attachments if not getattr(a, "is_picture", False)]
    share = limit // len(texts) if texts else 0
    for attachment in attachments:
        name = getattr(attachment, "name", "")
        if getattr(attachment, "is_picture", False):
            parts.append(_("[picture: %(name)s]") % {"name": name})
            continue
        body = getattr(attachment, "text", "") or ""
        whole = getattr(attachment, "text_length", None)
        whole = len(body) if whole is None else whole
        shown = body[:share]
        parts.append(_("[file: %(name)s]") % {"name": name} + "\n" + shown)
        if len(shown) < whole:
            parts.append(
                _("[only part of %(name)s is shown: %(left)d characters were left out]")
                % {"name": name, "left": whole - len(shown)}
            )
        elif not getattr(attachment, "text_complete", True):
            parts.append(
                _("[only part of %(name)s is shown: the file holds more than its extracted text]") % {"name": name}
            )
    return "\n\n".join(parts)


def _assemble(
    newest_first: Iterable[Message | _Row], attachments: dict[Any, list[Any]], current: dict[str, Any], limit: int
) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    total = len(current.get("content") or "")
    decided: set[Any] = set()
    since_last_message = True  # a write's answer is told in the turn right after it alone
    for message in newest_first:
        entry = _entry(message, attachments, decided, limit - total, since_last_message)
        since_last_message = since_last_message and message.role != Message.Role.USER
        if entry is None:
            continue
        size = len(entry["content"])
        if total + size > limit:
            break
        total += size
        kept.append(entry)
    kept.reverse()
    kept.append(current)
    return kept


def _entry(
    message: Message | _Row, attachments: dict[Any, list[Any]], decided: set[Any], room: int, fresh: bool
) -> dict[str, Any] | None:
    """The model's view of one earlier message (``room``: what is left of the window; ``fresh``:
    no message of the user's came after it), or None when it is left out."""
    if message.role == Message.Role.USER:
        return {"role": "user", "content": _fitted(message.content, attachments.get(message.pk, []), room)}
    if message.role == Message.Role.ASSISTANT:
        if message.tool_calls or not message.content:
            return None
        return {"role": "assistant", "content": message.content}
    if message.role == Message.Role.NOTICE:
        outcome = (message.notice_code or "").removeprefix("confirmation_")
        if not message.confirmation_id or outcome == message.notice_code:
            return None
        decided.add(message.confirmation_id)
        result = _confirmation_result(message) if fresh and outcome == "done" else ""
        phrase = confirmation_phrase(_confirmation_tool(message), outcome, _confirmation_edits(message), result)
        return {"role": "user", "content": phrase} if phrase else None
    if message.role == Message.Role.TOOL and _needs_confirmation(message):
        if message.confirmation_id in decided:
            return None
        phrase = confirmation_phrase(message.tool_name, "waiting")
        return {"role": "user", "content": phrase} if phrase else None
    return None


def _fitted(text: str, files: list[Any], room: int) -> str:
    """An earlier message's content with its files sharing what is left of the window.

    The headers and left-out lines take room too: a first try that overflows
    is made again with the files' share smaller by the overflow.
    """
    budget = max(room - len(text), 0)
    content = user_content(text, files, budget)
    over = len(content) - room
    if files and over > 0 and budget > 0:
        content = user_content(text, files, max(budget - over, 0))
    return content


def _confirmation_tool(notice: Message | _Row) -> str:
    """The card's ``tool_name``; the notice's own copy spares a query when the card is not loaded."""
    if isinstance(notice, _Row):
        return notice.confirmation_tool or ""
    if Message.confirmation.is_cached(notice):
        confirmation = notice.confirmation
        return confirmation.tool_name if confirmation is not None else ""
    tool = (notice.notice_params or {}).get("tool")
    if isinstance(tool, str) and tool:
        return tool
    if notice.confirmation_id is None:
        return ""
    return Confirmation.objects.filter(pk=notice.confirmation_id).values_list("tool_name", flat=True).first() or ""


def _confirmation_edits(notice: Message | _Row) -> Any:
    """What the user changed on the card before confirming it (server only, read for the model)."""
    if isinstance(notice, _Row):
        return notice.confirmation_edits
    if not (notice.notice_params or {}).get("edited") or notice.confirmation_id is None:
        return None
    return Confirmation.objects.filter(pk=notice.confirmation_id).values_list("edits", flat=True).first()


def _confirmation_result(notice: Message | _Row) -> str:
    """What the confirmed write returned (server only, read for the model)."""
    if isinstance(notice, _Row):
        return notice.confirmation_result or ""
    if not (notice.notice_params or {}).get("returned") or notice.confirmation_id is None:
        return ""
    return Confirmation.objects.filter(pk=notice.confirmation_id).values_list("result", flat=True).first() or ""


def _needs_confirmation(message: Message | _Row) -> bool:
    return message.tool_outcome == Message.ToolOutcome.NEEDS_CONFIRMATION and bool(message.confirmation_id)


class _Row(NamedTuple):
    """What the window reads of a stored message: a row read as values, with a ``Message``'s
    attribute names (a model instance per row would cost more than the rest of the read)."""

    pk: Any
    seq: int
    role: str
    content: str
    tool_calls: Any
    tool_name: str
    tool_outcome: str
    notice_code: str
    notice_params: Any
    confirmation_id: ConfirmationId
    confirmation_tool: str | None
    confirmation_edits: Any
    confirmation_result: str | None
    has_files: bool


_ROW_FIELDS = (
    "id",
    "seq",
    "role",
    "content",
    "tool_calls",
    "tool_name",
    "tool_outcome",
    "notice_code",
    "notice_params",
    "confirmation_id",
    "confirmation__tool_name",
    "confirmation__edits",
    "confirmation__result",
    "has_files",
)


def _newest_first(
    conversation_id: ConversationId, before_seq: int | None, files: dict[Any, list[Any]], limit: int
) -> Iterator[_Row]:
    relevant = (
        Q(role__in=[Message.Role.USER, Message.Role.ASSISTANT])
        | Q(role=Message.Role.TOOL, tool_outcome=Message.ToolOutcome.NEEDS_CONFIRMATION, confirmation__isnull=False)
        | Q(role=Message.Role.NOTICE, notice_code__startswith="confirmation_", confirmation__isnull=False)
    )
    qs = Message.objects.filter(relevant, conversation_id=conversation_id, active=True).annotate(
        has_files=Exists(Attachment.objects.filter(message=OuterRef("pk")))
    )
    upper = before_seq
    while True:
        page_qs = qs if upper is None else qs.filter(seq__lt=upper)
        page = [_Row._make(values) for values in page_qs.order_by("-seq").values_list(*_ROW_FIELDS)[:PAGE]]
        _read_files(page, files, limit)
        yield from page
        if len(page) < PAGE:
            return
        upper = page[-1].seq


def _by_message(attachments: Iterable[Any]) -> dict[Any, list[Any]]:
    grouped: dict[Any, list[Any]] = {}
    for attachment in attachments:
        grouped.setdefault(getattr(attachment, "message_id", None), []).append(attachment)
    return grouped


def _read_files(page: list[_Row], files: dict[Any, list[Any]], limit: int) -> None:
    """The files of the page's messages, each text cut in SQL to what a window can hold.

    One query, and only for a page where a message has files (``has_files``, from the page's own query).
    """
    ids = [m.pk for m in page if m.has_files and m.pk not in files]
    if not ids:
        return
    rows = (
        Attachment.objects.filter(message_id__in=ids)
        .annotate(text_length=Length("text"), text_head=Substr("text", 1, max(limit, 1)))
        .only("id", "message_id", "name", "is_picture", "text_complete")
        .order_by("created_at", "id")
    )
    for row in rows:
        row.text = row.text_head
        files.setdefault(row.message_id, []).append(row)
