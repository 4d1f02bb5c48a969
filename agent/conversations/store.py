"""Storing a message: the chat's counters, line end and the new row, after the caller's checks.

Hand-written SQL, on PostgreSQL one statement per message: every answer and
notice of a turn goes through here.
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Field, Model
from django.db.models.functions import Now
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from ..core import events
from ..core.conf import agent_settings
from ..core.errors import NotFound
from ..core.ids import ConversationId, MessageId
from ..models import Conversation, Lock, Message, Turn


class LeaseLost(Exception):
    """``append_message`` with a lease that is no longer held: nothing was stored."""


def append_message(
    conversation_id: uuid.UUID,
    *,
    title_from: str | None = None,
    lease: tuple[str, Any] | None = None,
    link_turn: bool = False,
    **fields: Any,
) -> Message:
    """Append a message to a live chat and broadcast it after commit.

    Trusts its caller: the turn loop and the cards, after their own checks.
    The chat's row is updated first, so its row lock orders ``seq``. With ``lease`` (a lock's
    name and holder), nothing is stored unless that lease is held and unexpired, its row
    locked in the same transaction (``LeaseLost``). With ``link_turn``, the message's ``turn``
    names it as the user's message it stores. The message joins the end of the chat's active
    line (its ``parent`` is the chat's ``line_end``, read under the chat's row lock, so two
    writers at once still make one line). On PostgreSQL all of it is one statement (one
    round trip, no transaction of its own), with the ``pre_save`` and ``post_save`` signals a
    ``save()`` would send; elsewhere a ``save()`` and a few more statements in a transaction.
    """
    now = timezone.now()
    title = auto_title(title_from) if title_from else ""
    message = Message(conversation_id=conversation_id, seq=0, created_at=now, **fields)
    if connection.vendor == "postgresql":
        return _append_in_one(message, title, lease, now, link_turn=link_turn, check=None)[0]
    with transaction.atomic(savepoint=False):
        if lease is not None and not _lease_held(lease, lock=True):
            raise LeaseLost()
        message.seq, message.parent_id = _advance_conversation(conversation_id, now, title, message.pk)
        message.save(force_insert=True)
        if link_turn and message.turn_id is not None:
            Turn.objects.filter(pk=message.turn_id).update(user_message=message)
        events.message_added(conversation_id, message.pk)
    return message


def append_off_line(conversation_id: ConversationId, parent_id: MessageId, **fields: Any) -> Message:
    """Store a message below ``parent_id`` on a line the chat no longer shows, and make it that line's end.

    It takes the next ``seq`` but leaves the active line and its end alone, so open tabs are not
    told of it (the caller's line change tells them to read the line again); a switch back to that
    line shows it after ``parent_id``, which remembers it as its child on the line.
    """
    meta = Conversation._meta
    quote = connection.ops.quote_name
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} SET message_count = message_count + 1"
            " WHERE id = %s RETURNING message_count",
            [db_value(meta, "id", conversation_id)],
        )
        row = cursor.fetchone()
        if row is None:
            raise NotFound()
        message = Message.objects.create(
            conversation_id=conversation_id, seq=int(row[0]), parent_id=parent_id, active=False, **fields
        )
        Message.objects.filter(pk=parent_id).update(last_child=message)
    return message


@dataclass(frozen=True)
class RidingCheck:
    """A caller's check read by the very statement that stores a message (PostgreSQL only).

    ``sql`` and ``params`` select one row (named ``agent_check`` in the store's statement); with
    ``gate``, an SQL condition on its columns and that condition's parameters, the message is
    stored only where the condition holds, so a check and the write it guards cost one round trip.
    """

    sql: str
    params: list[Any]
    gate: tuple[str, list[Any]] | None = None


class GateClosed(Exception):
    """``append_checked`` whose gate did not hold: nothing was stored; ``row`` is what the check read."""

    def __init__(self, row: Any) -> None:
        super().__init__("gate closed")
        self.row = row


def append_checked(
    conversation_id: uuid.UUID,
    check: RidingCheck,
    *,
    lease: tuple[str, Any] | None = None,
    **fields: Any,
) -> tuple[Message, Any]:
    """``append_message`` of a reply (it names no title) on PostgreSQL, with ``check`` read in the
    same statement: the message and the check's row. ``GateClosed`` when the check's gate refused
    the store."""
    now = timezone.now()
    message = Message(conversation_id=conversation_id, seq=0, created_at=now, **fields)
    return _append_in_one(message, "", lease, now, link_turn=False, check=check)


def _append_in_one(
    message: Message,
    title: str,
    lease: tuple[str, Any] | None,
    now: datetime,
    *,
    link_turn: bool,
    check: RidingCheck | None,
) -> tuple[Message, Any]:
    """The message stored by ``_store_in_one`` with the signals a ``save()`` sends, and its event."""
    saved = {"sender": Message, "instance": message, "raw": False, "using": connection.alias, "update_fields": None}
    pre_save.send(**saved)
    message.seq, message.parent_id, check_row = _store_in_one(message, title, lease, now, link_turn, check)
    message._state.adding, message._state.db = False, connection.alias
    post_save.send(**saved, created=True)
    events.message_added(message.conversation_id, message.pk)
    return message, check_row


def _store_in_one(
    message: Message,
    title: str,
    lease: tuple[str, Any] | None,
    now: datetime,
    link_turn: bool,
    check: RidingCheck | None,
) -> tuple[int, Any, Any]:
    """PostgreSQL: the lease and the chat's row (each locked ``FOR UPDATE``), the chat's counters
    and line end, the message and its turn's link to it, in one statement, with the caller's
    check; the message's ``seq`` and ``parent``, and the check's row. The rare refusal is told
    apart by one more read."""
    conversation, lock = Conversation._meta, Lock._meta
    conversation_db_id = db_value(conversation, "id", message.conversation_id)
    params: list[Any] = []
    if check is not None:
        params += check.params
        if check.gate is not None:
            params += check.gate[1]
    if lease is not None:
        params += [lease[0], db_value(lock, "holder", lease[1])]
    params += [conversation_db_id, Conversation.Status.DELETED]
    at = db_value(conversation, "last_message_at", now)
    params += [at, at, title, db_value(conversation, "line_end", message.pk), conversation_db_id]
    for field in _inserted_fields():
        params.append(field.get_db_prep_save(field.pre_save(message, add=True), connection))
    if link_turn:
        params.append(db_value(Turn._meta, "id", message.turn_id))
    if check is None:
        sql = _store_sql(lease is not None, link_turn)
    else:
        sql = _checked_store_sql(check.sql, check.gate[0] if check.gate else None, lease is not None, link_turn)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    check_row = None
    if check is not None:  # (the check's row count, its gate, seq, parent, the check's columns)
        check_row = tuple(row[4:]) if row[0] else None
        if not row[1]:
            raise GateClosed(check_row)
        row = row[2:4] if row[2] is not None else None
    if row is not None:
        return int(row[0]), row[1], check_row
    if lease is not None and not _lease_held(lease, lock=False):
        raise LeaseLost()
    raise NotFound()


def _lease_held(lease: tuple[str, Any], *, lock: bool) -> bool:
    """Whether ``holder`` still has the lease, by the database's clock; with ``lock``, its row stays
    locked to the end of the transaction, so no takeover can land before the writes that follow."""
    name, holder = lease
    rows = Lock.objects.filter(name=name, holder=holder, expires_at__gt=Now())
    return (rows.select_for_update() if lock else rows).exists()


def db_value(meta: Any, name: str, value: Any) -> Any:
    """``value`` as the database stores the field ``name`` of ``meta`` (a uuid is text on SQLite)."""
    return meta.get_field(name).get_db_prep_value(value, connection)


def _inserted_fields() -> list[Any]:
    """The message's columns the store statement fills from parameters (``seq`` and ``parent`` come from the chat)."""
    return [field for field in Message._meta.concrete_fields if field.attname not in ("seq", "parent_id")]


@functools.lru_cache(maxsize=None)
def column_of(model: type[Model], name: str) -> str:
    """The column a field of ``model`` is stored in."""
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column  # a column of its own, not a relation's reverse side
    return field.column


@functools.lru_cache(maxsize=64)
def _checked_store_sql(check: str, gate: str | None, fenced: bool, link_turn: bool) -> str:
    """``_store_sql`` after a caller's check (and its gate) read in the same statement: the check's
    row count, whether its gate held, the stored ``seq`` and ``parent`` (NULL when nothing was),
    then the check's own columns."""
    store = _store_sql(fenced, link_turn, gated=gate is not None)
    ctes, final = store[len("WITH ") :].rsplit(" SELECT seq, parent FROM agent_stored", 1)
    gate_cte = f"agent_gate AS MATERIALIZED (SELECT 1 FROM agent_check WHERE {gate}), " if gate else ""
    return (
        f"WITH agent_check AS MATERIALIZED ({check}), {gate_cte}{ctes}{final}"
        f" SELECT (SELECT COUNT(*) FROM agent_check), {'EXISTS (SELECT 1 FROM agent_gate)' if gate else 'TRUE'},"
        " agent_stored.seq, agent_stored.parent, agent_check.*"
        " FROM (SELECT 1) AS agent_one LEFT JOIN agent_check ON TRUE LEFT JOIN agent_stored ON TRUE"
    )


@functools.lru_cache(maxsize=None)
def _store_sql(fenced: bool, link_turn: bool, *, gated: bool = False) -> str:
    """``_store_in_one``'s statement, built once per shape (PostgreSQL's quoting); ``gated``: only
    where a caller's check allows it (``agent_gate``)."""
    quote = connection.ops.quote_name
    conversation, lock, turn = Conversation._meta, Lock._meta, Turn._meta
    fence = link = ""
    if fenced:
        fence = (
            f"agent_fence AS MATERIALIZED (SELECT 1 FROM {quote(lock.db_table)}"
            f" WHERE {quote('name')} = %s AND {quote('holder')} = %s"
            f" AND {quote('expires_at')} > STATEMENT_TIMESTAMP() FOR UPDATE), "  # the database's clock, as leases are
        )
    line_end = quote("line_end")
    columns = [quote(column_of(Message, name)) for name in ("seq", "parent")]
    columns += [quote(f.column) for f in _inserted_fields()]
    values = [f"agent_chat.{quote('message_count')}", f"(SELECT {line_end} FROM agent_before)"]
    values += ["%s"] * (len(columns) - 2)
    if link_turn:
        link = (
            f", agent_link AS (UPDATE {quote(turn.db_table)} SET {quote('user_message_id')} = agent_stored.id"
            f" FROM agent_stored WHERE {quote(turn.db_table)}.{quote('id')} = %s)"
        )
    # The chat's row is read FOR UPDATE before it is updated: a writer that waited for another
    # one's commit reads the line end that one left, not the one of its own snapshot.
    return (
        f"WITH {fence}agent_before AS MATERIALIZED (SELECT {line_end} FROM {quote(conversation.db_table)}"
        f" WHERE {quote('id')} = %s AND {quote('status')} <> %s"
        f"{' AND EXISTS (SELECT 1 FROM agent_fence)' if fenced else ''}"
        f"{' AND EXISTS (SELECT 1 FROM agent_gate)' if gated else ''} FOR UPDATE), "
        f"agent_chat AS (UPDATE {quote(conversation.db_table)} SET"
        f" {quote('message_count')} = {quote('message_count')} + 1, {quote('last_message_at')} = %s,"
        f" {quote('updated_at')} = %s, {quote('title')} = CASE WHEN {quote('title')} = '' THEN %s"
        f" ELSE {quote('title')} END, {_UNARCHIVE}, {line_end} = %s WHERE {quote('id')} = %s"
        f" AND EXISTS (SELECT 1 FROM agent_before) RETURNING {quote('message_count')}), "
        f"agent_stored AS (INSERT INTO {quote(Message._meta.db_table)} ({', '.join(columns)})"
        f" SELECT {', '.join(values)} FROM agent_chat RETURNING {quote('id')} AS id, {quote('seq')} AS seq,"
        f" {quote(column_of(Message, 'parent'))} AS parent)"
        f"{link} SELECT seq, parent FROM agent_stored"
    )


_UNARCHIVE = (
    f"status = CASE WHEN status = '{Conversation.Status.ARCHIVED.value}'"
    f" THEN '{Conversation.Status.ACTIVE.value}' ELSE status END"
)


"""A chat that gets a new message is in use again: it comes back to the active list."""


def _advance_conversation(
    conversation_id: ConversationId, now: datetime, title: str, message_id: MessageId
) -> tuple[int, Any]:
    """Count the new message on a live chat and make it the end of the active line: its ``seq`` and
    its ``parent`` (the line's end before it)."""
    meta = Conversation._meta
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(meta.db_table)} SET message_count = message_count + 1, "
        "last_message_at = %s, updated_at = %s, title = CASE WHEN title = '' THEN %s ELSE title END, "
        f"{_UNARCHIVE} WHERE id = %s AND status <> %s RETURNING message_count, line_end"
    )
    at = db_value(meta, "last_message_at", now)
    conversation_db_id = db_value(meta, "id", conversation_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, [at, at, title, conversation_db_id, Conversation.Status.DELETED])
        row = cursor.fetchone()
        if row is None:
            raise NotFound()
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} SET line_end = %s WHERE id = %s",
            [db_value(meta, "line_end", message_id), conversation_db_id],
        )
    return int(row[0]), meta.get_field("line_end").to_python(row[1])


def auto_title(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()[: agent_settings.AUTO_TITLE_CHARS]
