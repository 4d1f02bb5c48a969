"""Versions of a chat: edit an earlier message, answer one again, switch between the versions.

Nothing is overwritten. A chat's messages form a tree: each message's ``parent``
is the one before it on its line, and the children of one parent are versions
of each other. The active line is one root-to-leaf path, marked on its rows
(``active``) and ended by the chat's ``line_end``, so paging it reads an index of
its own and a new message joins it in the statement that stores it. When a
message leaves the line it records which of its children was on the line
(``last_child``), so a switch brings back the same line it once showed.

Moving the line is a bulk UPDATE of the rows that leave it and one of those that
join it, under the chat's lock, in one transaction: never a walk of the whole chat.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable

from django.db import connection, transaction
from django.utils import timezone

from .. import attachments, confirmations
from ..access import Actor, Scope
from ..conversations import authorize_conversation, parse_uuid, validate_user_text
from ..core import events
from ..core.errors import Busy, NotFound
from ..core.ids import ConversationId, MessageId
from ..models import Attachment, Conversation, Message, Turn
from . import locks
from .starting import start


def edit_message(
    actor: Actor,
    conversation_id: ConversationId,
    message_id: MessageId,
    text: Any,
    *,
    attachment_ids: Iterable[Any] | None = None,
    impersonated: bool,
    language: str | None = None,
) -> Turn:
    """Start a turn on a new version of the user's message ``message_id`` (on the active line).

    The new message takes the original's place: the original and everything after it leave the
    line. Its files are ``attachment_ids`` (the composer's), or without them the original's.
    Everything a turn's start checks applies.
    """
    branch = _Edit(message_id, text, attachment_ids)
    return start(actor, conversation_id, None, impersonated=impersonated, language=language, branch=branch)


def regenerate(
    actor: Actor,
    conversation_id: ConversationId,
    message_id: MessageId,
    *,
    impersonated: bool,
    language: str | None = None,
) -> Turn:
    """Answer again the user's message that ``message_id`` (output of a turn, on the active line) answers.

    The same message, its text and its files, is answered anew; what followed it leaves the line
    and the new output becomes its sibling. Everything a turn's start checks applies.
    """
    return start(
        actor, conversation_id, None, impersonated=impersonated, language=language, branch=_Regenerate(message_id)
    )


def switch_version(actor: Actor, conversation_id: ConversationId, message_id: MessageId, *, impersonated: bool) -> bool:
    """Make the version that holds ``message_id`` the active one, with the line it last showed below it.

    Refused (``Busy``) while a turn runs in the chat. True when the line changed.
    """
    scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    target = _own_message(conversation, message_id)
    holder = uuid.uuid4()
    name = locks.chat_lock(conversation.pk)
    with transaction.atomic():
        if not locks.take(name, holder):
            raise Busy()
        changed = not target.active and _switch_to(conversation, target)
        locks.release_names([name], holder)
        if changed:
            events.line_changed(conversation.pk)
    return changed


# -- what a turn's start does for a version ------------------------------------------


class _Edit:
    """A new version of a user's message: the line is cut before the original."""

    def __init__(self, message_id: MessageId, text: Any, attachment_ids: Iterable[Any] | None) -> None:
        self.message_id = message_id
        self.text = text
        self.attachment_ids = attachment_ids

    def prepare(self, scope: Scope, conversation: Conversation) -> tuple[str, list[Attachment]]:
        self.original = _on_line(conversation, self.message_id)
        if self.original.role != Message.Role.USER:
            raise NotFound()
        text = validate_user_text(self.text)
        if self.attachment_ids is not None:
            return text, attachments.for_turn(scope, conversation, self.attachment_ids)
        return text, list(Attachment.objects.filter(message=self.original).defer("text").order_by("created_at", "id"))

    def apply(self, turn: Turn) -> None:
        _leave_line_after(turn.conversation_id, self.original.parent_id, self.original.seq)
        events.line_changed(turn.conversation_id)


class _Regenerate:
    """Another answer to a user's message: the line is cut after it, the message stays."""

    def __init__(self, message_id: MessageId) -> None:
        self.message_id = message_id

    def prepare(self, scope: Scope, conversation: Conversation) -> tuple[str, list[Attachment]]:
        output = _on_line(conversation, self.message_id)
        if output.role == Message.Role.USER:
            raise NotFound()
        asked = (
            Message.objects.filter(conversation=conversation, active=True, role=Message.Role.USER, seq__lt=output.seq)
            .order_by("-seq")
            .first()
        )
        if asked is None:
            raise NotFound()
        self.asked = asked
        return asked.content, list(Attachment.objects.filter(message=asked).defer("text").order_by("created_at", "id"))

    def apply(self, turn: Turn) -> None:
        _leave_line_after(turn.conversation_id, self.asked.pk, self.asked.seq + 1)
        Turn.objects.filter(pk=turn.pk).update(user_message=self.asked, attachment_ids=[])
        turn.user_message, turn.attachment_ids = self.asked, []
        events.line_changed(turn.conversation_id)


def _own_message(conversation: Conversation, message_id: MessageId) -> Message:
    try:
        return Message.objects.get(conversation=conversation, pk=parse_uuid(message_id))
    except Message.DoesNotExist:
        raise NotFound() from None


def _on_line(conversation: Conversation, message_id: MessageId) -> Message:
    message = _own_message(conversation, message_id)
    if not message.active:
        raise NotFound()
    return message


# -- the turn's files ------------------------------------------------------------------


def link_files(turn: Turn, message: Message) -> list[Attachment]:
    """The turn's files on its new user message: the composer's are linked, and an edit's files
    that belong to the original message are copied (the original keeps its own; the stored file
    is shared, and removed with the last row that names it)."""
    linked = attachments.link(turn, message)
    wanted = [uuid.UUID(str(i)) for i in (turn.attachment_ids or [])]
    if len(linked) == len(wanted):
        return linked
    taken = {row.pk for row in linked}
    kept = {
        row.pk: row
        for row in Attachment.objects.filter(
            pk__in=[pk for pk in wanted if pk not in taken],
            conversation_id=turn.conversation_id,
            user_id=turn.user_id,
            status=Attachment.Status.READY,
            message__isnull=False,
        ).exclude(message=message)
    }
    copies = {}
    for pk, row in kept.items():
        row.pk, row.message, row.created_at = uuid.uuid4(), message, timezone.now()
        copies[pk] = row
    Attachment.objects.bulk_create(copies.values())
    by_pk = {row.pk: row for row in linked}
    return [by_pk.get(pk) or copies[pk] for pk in wanted if pk in by_pk or pk in copies]


def asked_again(turn: Turn) -> tuple[Message, list[Attachment]]:
    """The stored user message a regenerating turn answers, with its files."""
    assert turn.user_message_id is not None  # a regenerating turn is started for a stored message
    message = Message.objects.get(pk=turn.user_message_id)
    return message, list(Attachment.objects.filter(message=message).order_by("created_at", "id"))


# -- moving the line ----------------------------------------------------------------------


def _leave_line_after(conversation_id: uuid.UUID, branch_point: Any, from_seq: int) -> None:
    """The line's messages from ``from_seq`` on leave it; the line ends at ``branch_point`` (None:
    the chat starts anew), where the next message stored becomes a new version."""
    old_end = _lock_line(conversation_id)
    _deactivate(conversation_id, from_seq)
    Conversation.objects.filter(pk=conversation_id).update(
        line_end=branch_point, has_versions=True, updated_at=timezone.now()
    )
    confirmations.cancel_off_line(conversation_id, old_end)


def _lock_line(conversation_id: ConversationId) -> Any:
    """Lock the chat's row before the line moves, and read where the line ends now.

    Every message is stored under that lock (it reads the line's end), so one stored while the
    line moves (a card's outcome, a turn's notice) waits for the move and joins the line that holds
    after it, or was stored before and moves with its line: the active line stays one path.
    """
    return Conversation.objects.select_for_update().filter(pk=conversation_id).values_list("line_end", flat=True).get()


def _deactivate(conversation_id: ConversationId, from_seq: int) -> int:
    """One UPDATE: the active line's messages from ``from_seq`` on leave it, each remembering its
    child on the line."""
    quote = connection.ops.quote_name
    table = quote(Message._meta.db_table)
    sql = (
        f"UPDATE {table} SET {quote('active')} = %s, {quote('last_child_id')} = ("
        f"SELECT child.{quote('id')} FROM {table} child WHERE child.{quote('conversation_id')} = %s"
        f" AND child.{quote('parent_id')} = {table}.{quote('id')} AND child.{quote('active')} = %s)"
        f" WHERE {quote('conversation_id')} = %s AND {quote('active')} = %s AND {quote('seq')} >= %s"
    )
    conversation_db_id = _prep("conversation", conversation_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, [False, conversation_db_id, True, conversation_db_id, True, from_seq])
        return int(cursor.rowcount)


def _switch_to(conversation: Conversation, target: Message) -> bool:
    """The target's version onto the line: its ancestors off the line and the line it last showed below it."""
    old_end = _lock_line(conversation.pk)
    quote = connection.ops.quote_name
    table = quote(Message._meta.db_table)
    conversation_db_id = _prep("conversation", conversation.pk)
    # The target and its ancestors up to the first one still on the line (the branch point).
    up_sql = (
        f"WITH RECURSIVE agent_up (id, parent_id, seq, active) AS ("
        f"SELECT {quote('id')}, {quote('parent_id')}, {quote('seq')}, {quote('active')} FROM {table}"
        f" WHERE {quote('id')} = %s AND {quote('conversation_id')} = %s"
        f" UNION ALL SELECT m.{quote('id')}, m.{quote('parent_id')}, m.{quote('seq')}, m.{quote('active')}"
        f" FROM {table} m JOIN agent_up ON m.{quote('id')} = agent_up.parent_id"
        f" WHERE NOT agent_up.active AND m.{quote('conversation_id')} = %s)"
        f" SELECT id, seq, active FROM agent_up"
    )
    with connection.cursor() as cursor:
        cursor.execute(up_sql, [_prep("id", target.pk), conversation_db_id, conversation_db_id])
        chain = cursor.fetchall()
    on_line = [row for row in chain if row[2]]
    branch_seq = on_line[0][1] if on_line else None
    joining = [row[0] for row in chain if not row[2]]
    _deactivate(conversation.pk, 0 if branch_seq is None else branch_seq + 1)
    # Below the target, the line it showed when it left: its remembered children, one by one.
    down_sql = (
        f"WITH RECURSIVE agent_down (id, last_child_id) AS ("
        f"SELECT {quote('id')}, {quote('last_child_id')} FROM {table} WHERE {quote('id')} = %s"
        f" UNION ALL SELECT m.{quote('id')}, m.{quote('last_child_id')} FROM {table} m"
        f" JOIN agent_down ON m.{quote('id')} = agent_down.last_child_id WHERE m.{quote('conversation_id')} = %s)"
        f" UPDATE {table} SET {quote('active')} = %s WHERE {quote('conversation_id')} = %s"
        f" AND ({quote('id')} IN (SELECT id FROM agent_down)"
        f"{' OR ' + quote('id') + ' IN (' + ', '.join(['%s'] * len(joining)) + ')' if joining else ''})"
        f" RETURNING {quote('id')}, {quote('seq')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(down_sql, [_prep("id", target.pk), conversation_db_id, True, conversation_db_id, *joining])
        joined = cursor.fetchall()
    end = max(joined, key=lambda row: row[1])[0]
    Conversation.objects.filter(pk=conversation.pk).update(
        line_end=Message._meta.pk.to_python(end), updated_at=timezone.now()
    )
    confirmations.cancel_off_line(conversation.pk, old_end)
    return True


def _prep(name: str, value: Any) -> Any:
    field = Message._meta.get_field(name)
    if name == "conversation":
        field = Conversation._meta.pk
    return field.get_db_prep_value(value, connection)  # type: ignore[union-attr]
