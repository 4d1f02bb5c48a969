"""The chats and messages of the assistant, one door per operation.

Every public function takes a ``SessionRef`` first and a keyword-only
``impersonated`` flag with no default, runs the checks of ``agent.access``,
and answers "not there" and "not yours" with the same ``NotFound``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Now
from django.db.models.signals import post_save, pre_save
from django.utils import timezone
from django.utils.translation import gettext as _

from . import events, quotas
from .access import Scope, SessionRef, authorize_session
from .conf import agent_settings
from .errors import InvalidCursor, NotFound
from .models import Attachment, Conversation, Lock, Message, Turn

topic = events.topic


@dataclass(frozen=True)
class Page:
    conversations: list[Conversation]
    next_cursor: str | None


def parse_uuid(value: Any) -> uuid.UUID:
    """A UUID from a client's id, or ``NotFound`` for anything malformed."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise NotFound()
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound() from None


def owned_conversation(scope: Scope, conversation_id: Any) -> Conversation:
    """The session user's live chat, or ``NotFound`` whatever the reason."""
    pk = parse_uuid(conversation_id)
    try:
        return Conversation.objects.alive().get(pk=pk, user_id=scope.user_id)
    except Conversation.DoesNotExist:
        raise NotFound() from None


def authorize_conversation(ref: SessionRef, conversation_id: Any, *, impersonated: bool) -> tuple[Scope, Conversation]:
    """The access checks, then that the chat is the session user's and not deleted."""
    scope = authorize_session(ref, impersonated=impersonated)
    return scope, owned_conversation(scope, conversation_id)


# -- chats --------------------------------------------------------------------


def create_conversation(ref: SessionRef, attrs: Mapping[str, Any], *, impersonated: bool) -> Conversation:
    """A new empty active chat of the session's user; only ``title`` is read.

    ``TooManyChats`` past ``NEW_CHATS_PER_MINUTE``.
    """
    scope = authorize_session(ref, impersonated=impersonated)
    title = attrs.get("title") or ""
    if title:
        title = _clean_title(title)
    with transaction.atomic():
        quotas.hold(scope.user_id)
        quotas.check_new_chat(scope.user_id)
        return Conversation.objects.create(user=scope.user, title=title, last_message_at=timezone.now())


PAGE_SIZE: Any = object()
"""The default ``limit`` of a listing: the page size its setting names (``CHATS_PAGE``, ``MESSAGES_PAGE``)."""


def list_conversations(
    ref: SessionRef,
    *,
    impersonated: bool,
    archived: bool = False,
    limit: int = PAGE_SIZE,
    cursor: str | None = None,
) -> Page:
    """Active chats (with ``archived=True``, the archived ones), newest ``last_message_at`` first,
    one keyset page (``CHATS_PAGE``) at a time."""
    scope = authorize_session(ref, impersonated=impersonated)
    status = Conversation.Status.ARCHIVED if archived else Conversation.Status.ACTIVE
    return _keyset_page(Conversation.objects.filter(user_id=scope.user_id, status=status), limit, cursor)


SEARCH_MAX_CHARS = 200


def search_conversations(
    ref: SessionRef, query: Any, *, impersonated: bool, limit: int = PAGE_SIZE, cursor: str | None = None
) -> Page:
    """The user's chats, active and archived, whose title or text matches ``query``; pages as
    ``list_conversations``.

    PostgreSQL's full-text search with the ``simple`` configuration (whole words in any
    language); elsewhere a plain case-insensitive substring.
    """
    scope = authorize_session(ref, impersonated=impersonated)
    if not isinstance(query, str) or not query.strip():
        raise ValidationError({"q": _("Type something to search for.")}, code="blank")
    if len(query) > SEARCH_MAX_CHARS:
        raise ValidationError(
            {"q": _("A search can be at most %(max)d characters.") % {"max": SEARCH_MAX_CHARS}}, code="max_length"
        )
    qs = _matching(Conversation.objects.alive().filter(user_id=scope.user_id), query.strip())
    return _keyset_page(qs, limit, cursor)


def _matching(qs: QuerySet[Conversation], query: str) -> QuerySet[Conversation]:
    """The chats of ``qs`` whose title or a user's or assistant's message matches ``query``."""
    said = Message.objects.filter(conversation=OuterRef("pk"), role__in=(Message.Role.USER, Message.Role.ASSISTANT))
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchVector

        words = SearchQuery(query, config="simple", search_type="websearch")
        said = said.annotate(words=SearchVector("content", config="simple")).filter(words=words)
        qs = qs.annotate(title_words=SearchVector("title", config="simple"))
        return qs.filter(Q(title_words=words) | Q(Exists(said)))
    return qs.filter(Q(title__icontains=query) | Q(Exists(said.filter(content__icontains=query))))


def _keyset_page(qs: QuerySet[Conversation], limit: Any, cursor: str | None) -> Page:
    limit = _clamp(agent_settings.CHATS_PAGE if limit is PAGE_SIZE else limit, agent_settings.CHATS_PAGE_MAX)
    if cursor is not None:
        at, pk = decode_conversation_cursor(cursor)
        qs = qs.filter(last_message_at__lte=at).filter(Q(last_message_at__lt=at) | Q(last_message_at=at, id__lt=pk))
    rows = list(qs.order_by("-last_message_at", "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, encode_conversation_cursor(rows[-1]) if more else None)


def encode_conversation_cursor(conversation: Conversation) -> str:
    raw = json.dumps([conversation.last_message_at.isoformat(), str(conversation.id)])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_conversation_cursor(cursor: Any) -> tuple[datetime, uuid.UUID]:
    if not isinstance(cursor, str) or not cursor or len(cursor) > 200:
        raise InvalidCursor()
    try:
        at_text, pk_text = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        at = datetime.fromisoformat(at_text)
        pk = uuid.UUID(pk_text)
    except (ValueError, TypeError, AttributeError, binascii.Error, UnicodeDecodeError):
        raise InvalidCursor() from None
    if at.tzinfo is None:
        raise InvalidCursor()
    return at, pk


def get_conversation(ref: SessionRef, conversation_id: Any, *, impersonated: bool) -> dict[str, Any]:
    """The chat with the messages of its active line, oldest first, as a client sees them."""
    _scope, conversation = authorize_conversation(ref, conversation_id, impersonated=impersonated)
    messages = _client_rows(conversation.messages.filter(active=True).order_by("seq"))
    return {**conversation_view(conversation), "messages": client_views(messages, versions=conversation.has_versions)}


def rename_conversation(ref: SessionRef, conversation_id: Any, title: Any, *, impersonated: bool) -> Conversation:
    """Rename; a blank title or one over the maximum is a ``ValidationError``."""
    scope = authorize_session(ref, impersonated=impersonated)
    pk = parse_uuid(conversation_id)
    title = _clean_title(title)
    return _update_owned(scope, pk, title=title)


def archive_conversation(ref: SessionRef, conversation_id: Any, *, impersonated: bool) -> Conversation:
    """Take the chat out of the list; it can still be opened and written to."""
    scope = authorize_session(ref, impersonated=impersonated)
    return _update_owned(scope, parse_uuid(conversation_id), status=Conversation.Status.ARCHIVED)


def restore_conversation(ref: SessionRef, conversation_id: Any, *, impersonated: bool) -> Conversation:
    """An archived chat back in the list: one conditional UPDATE, which never brings back a deleted one."""
    scope = authorize_session(ref, impersonated=impersonated)
    return _update_owned(scope, parse_uuid(conversation_id), status=Conversation.Status.ACTIVE)


def delete_conversation(ref: SessionRef, conversation_id: Any, *, impersonated: bool) -> Conversation:
    """Soft delete: the rows stay, every function here treats the chat as missing."""
    scope = authorize_session(ref, impersonated=impersonated)
    return _update_owned(scope, parse_uuid(conversation_id), status=Conversation.Status.DELETED)


def _update_owned(scope: Scope, pk: uuid.UUID, **changes: Any) -> Conversation:
    """One conditional UPDATE of the owner's live chat; zero rows is ``NotFound``."""
    with transaction.atomic():
        updated = (
            Conversation.objects.alive()
            .filter(pk=pk, user_id=scope.user_id)
            .update(**changes, updated_at=timezone.now())
        )
        if not updated:
            raise NotFound()
        events.conversation_changed(pk)
    return Conversation.objects.get(pk=pk)


def _clean_title(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise ValidationError({"title": _("The title cannot be blank.")}, code="blank")
    title = title.strip()
    if len(title) > agent_settings.MAX_TITLE_CHARS:
        raise ValidationError(
            {"title": _("The title can be at most %(max)d characters.") % {"max": agent_settings.MAX_TITLE_CHARS}},
            code="max_length",
        )
    return title


# -- messages -----------------------------------------------------------------


def get_message(ref: SessionRef, conversation_id: Any, message_id: Any, *, impersonated: bool) -> dict[str, Any]:
    """One message of the user's chat, as a client sees it; one off the active line too (``active`` False)."""
    return message_view(authorize_session(ref, impersonated=impersonated), conversation_id, message_id)


def message_view(scope: Scope, conversation_id: Any, message_id: Any) -> dict[str, Any]:
    """``get_message`` for a scope checked just now: the sockets of one user share it.

    One plain statement (the user's live chat joined to the message): every
    open tab waits for it, and the ORM takes longer to build the query than
    PostgreSQL to answer it. Its uuids go in as the database stores them (text
    on SQLite). A card's message reads its card after.
    """
    rows = list(
        Message.objects.raw(
            _message_of_live_chat(),
            [
                _prep(Message._meta, "id", parse_uuid(message_id)),
                _prep(Conversation._meta, "id", parse_uuid(conversation_id)),
                scope.user_id,
                Conversation.Status.DELETED,
            ],
        )
    )
    if not rows:
        raise NotFound()
    return client_views(rows, versions=rows[0].agent_has_versions)[0]


@functools.cache
def _message_of_live_chat() -> str:
    quote = connection.ops.quote_name
    return (
        f"SELECT m.*, c.{quote(Conversation._meta.get_field('has_versions').column)} AS agent_has_versions "
        f"FROM {quote(Message._meta.db_table)} m "
        f"JOIN {quote(Conversation._meta.db_table)} c ON c.{quote(Conversation._meta.pk.column)} = "  # type: ignore[union-attr]
        f"m.{quote(Message._meta.get_field('conversation').column)} "
        f"WHERE m.{quote(Message._meta.pk.column)} = %s AND c.{quote(Conversation._meta.pk.column)} = %s "  # type: ignore[union-attr]
        f"AND c.{quote(Conversation._meta.get_field('user').column)} = %s "
        f"AND c.{quote(Conversation._meta.get_field('status').column)} <> %s"
    )


def list_messages(
    ref: SessionRef,
    conversation_id: Any,
    *,
    impersonated: bool,
    after: Any = None,
    before: Any = None,
    latest: bool = False,
    limit: int = PAGE_SIZE,
) -> list[dict[str, Any]]:
    """A page of the active line's messages (``MESSAGES_PAGE``), always oldest first; keyset on ``seq``.

    A cursor may be any message of the chat, on the line or off it: the page is the line's
    messages after (or before) its ``seq``."""
    _scope, conversation = authorize_conversation(ref, conversation_id, impersonated=impersonated)
    limit = _clamp(agent_settings.MESSAGES_PAGE if limit is PAGE_SIZE else limit, agent_settings.MESSAGES_PAGE_MAX)
    if after is not None and (before is not None or latest):
        raise InvalidCursor()
    qs = Message.objects.filter(conversation=conversation, active=True)
    versions = conversation.has_versions
    if after is not None:
        rows = qs.filter(seq__gt=_cursor_seq(conversation, after)).order_by("seq")[:limit]
        return client_views(_client_rows(rows), versions=versions)
    if before is not None:
        qs = qs.filter(seq__lt=_cursor_seq(conversation, before))
    elif not latest:
        return client_views(_client_rows(qs.order_by("seq")[:limit]), versions=versions)
    newest_first = _client_rows(qs.order_by("-seq")[:limit])
    return client_views(list(reversed(newest_first)), versions=versions)


def _cursor_seq(conversation: Conversation, message_id: Any) -> int:
    try:
        pk = parse_uuid(message_id)
    except NotFound:
        raise InvalidCursor() from None
    seq = Message.objects.filter(conversation=conversation, pk=pk).values_list("seq", flat=True).first()
    if seq is None:
        raise InvalidCursor()
    return seq


def add_message(ref: SessionRef, conversation_id: Any, attrs: Mapping[str, Any], *, impersonated: bool) -> Message:
    """Store the user's own text; every key of ``attrs`` but ``content`` is ignored."""
    scope, conversation = authorize_conversation(ref, conversation_id, impersonated=impersonated)
    content = validate_user_text(attrs.get("content"))
    return append_message(conversation.pk, role=Message.Role.USER, content=content, title_from=content)


def validate_user_text(content: Any) -> str:
    """The text a session may write: not blank, at most ``HISTORY_CHARS``."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationError({"content": _("The message cannot be blank.")}, code="blank")
    if len(content) > agent_settings.HISTORY_CHARS:
        raise ValidationError(
            {"content": _("The message can be at most %(max)d characters.") % {"max": agent_settings.HISTORY_CHARS}},
            code="max_length",
        )
    return content


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
        saved = {"sender": Message, "instance": message, "raw": False, "using": connection.alias, "update_fields": None}
        pre_save.send(**saved)
        message.seq, message.parent_id = _store_in_one(message, title, lease, now, link_turn=link_turn)
        message._state.adding, message._state.db = False, connection.alias
        post_save.send(**saved, created=True)
        events.message_added(conversation_id, message.pk)
        return message
    with transaction.atomic(savepoint=False):
        if lease is not None and not _lease_held(lease, lock=True):
            raise LeaseLost()
        message.seq, message.parent_id = _advance_chat(conversation_id, now, title, message.pk)
        message.save(force_insert=True)
        if link_turn:
            Turn.objects.filter(pk=message.turn_id).update(user_message=message)
        events.message_added(conversation_id, message.pk)
    return message


def _store_in_one(
    message: Message, title: str, lease: tuple[str, Any] | None, now: datetime, *, link_turn: bool
) -> tuple[int, Any]:
    """PostgreSQL: the lease and the chat's row (each locked ``FOR UPDATE``), the chat's counters
    and line end, the message and its turn's link to it, in one statement; the message's ``seq``
    and ``parent``. The rare refusal is told apart by one more read."""
    chat, lock = Conversation._meta, Lock._meta
    chat_id = _prep(chat, "id", message.conversation_id)
    params: list[Any] = []
    if lease is not None:
        params += [lease[0], _prep(lock, "holder", lease[1])]
    params += [chat_id, Conversation.Status.DELETED]
    at = _prep(chat, "last_message_at", now)
    params += [at, at, title, _prep(chat, "line_end", message.pk), chat_id]
    for field in _inserted_fields():
        params.append(field.get_db_prep_save(field.pre_save(message, add=True), connection))
    if link_turn:
        params.append(_prep(Turn._meta, "id", message.turn_id))
    sql = _store_sql(lease is not None, link_turn)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is not None:
        return int(row[0]), row[1]
    if lease is not None and not _lease_held(lease, lock=False):
        raise LeaseLost()
    raise NotFound()


def _lease_held(lease: tuple[str, Any], *, lock: bool) -> bool:
    """Whether ``holder`` still has the lease, by the database's clock; with ``lock``, its row stays
    locked to the end of the transaction, so no takeover can land before the writes that follow."""
    name, holder = lease
    rows = Lock.objects.filter(name=name, holder=holder, expires_at__gt=Now())
    return (rows.select_for_update() if lock else rows).exists()


def _prep(meta: Any, name: str, value: Any) -> Any:
    return meta.get_field(name).get_db_prep_value(value, connection)


def _inserted_fields() -> list[Any]:
    """The message's columns the store statement fills from parameters (``seq`` and ``parent`` come from the chat)."""
    return [field for field in Message._meta.concrete_fields if field.attname not in ("seq", "parent_id")]


@functools.lru_cache(maxsize=None)
def _store_sql(fenced: bool, link_turn: bool) -> str:
    """``_store_in_one``'s statement, built once per shape (PostgreSQL's quoting)."""
    quote = connection.ops.quote_name
    chat, lock, turn = Conversation._meta, Lock._meta, Turn._meta
    fence = link = ""
    if fenced:
        fence = (
            f"agent_fence AS MATERIALIZED (SELECT 1 FROM {quote(lock.db_table)}"
            f" WHERE {quote('name')} = %s AND {quote('holder')} = %s"
            f" AND {quote('expires_at')} > STATEMENT_TIMESTAMP() FOR UPDATE), "  # the database's clock, as leases are
        )
    line_end = quote("line_end")
    columns = [quote(Message._meta.get_field(name).column) for name in ("seq", "parent")]
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
        f"WITH {fence}agent_before AS MATERIALIZED (SELECT {line_end} FROM {quote(chat.db_table)}"
        f" WHERE {quote('id')} = %s AND {quote('status')} <> %s"
        f"{' AND EXISTS (SELECT 1 FROM agent_fence)' if fenced else ''} FOR UPDATE), "
        f"agent_chat AS (UPDATE {quote(chat.db_table)} SET"
        f" {quote('message_count')} = {quote('message_count')} + 1, {quote('last_message_at')} = %s,"
        f" {quote('updated_at')} = %s, {quote('title')} = CASE WHEN {quote('title')} = '' THEN %s"
        f" ELSE {quote('title')} END, {_UNARCHIVE}, {line_end} = %s WHERE {quote('id')} = %s"
        f" AND EXISTS (SELECT 1 FROM agent_before) RETURNING {quote('message_count')}), "
        f"agent_stored AS (INSERT INTO {quote(Message._meta.db_table)} ({', '.join(columns)})"
        f" SELECT {', '.join(values)} FROM agent_chat RETURNING {quote('id')} AS id, {quote('seq')} AS seq,"
        f" {quote(Message._meta.get_field('parent').column)} AS parent)"
        f"{link} SELECT seq, parent FROM agent_stored"
    )


_UNARCHIVE = (
    f"status = CASE WHEN status = '{Conversation.Status.ARCHIVED.value}'"
    f" THEN '{Conversation.Status.ACTIVE.value}' ELSE status END"
)
"""A chat that gets a new message is in use again: it comes back to the active list."""


def _advance_chat(conversation_id: Any, now: datetime, title: str, message_id: Any) -> tuple[int, Any]:
    """Count the new message on a live chat and make it the end of the active line: its ``seq`` and
    its ``parent`` (the line's end before it)."""
    meta = Conversation._meta
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(meta.db_table)} SET message_count = message_count + 1, "
        "last_message_at = %s, updated_at = %s, title = CASE WHEN title = '' THEN %s ELSE title END, "
        f"{_UNARCHIVE} WHERE id = %s AND status <> %s RETURNING message_count, line_end"
    )
    at = _prep(meta, "last_message_at", now)
    chat_id = _prep(meta, "id", conversation_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, [at, at, title, chat_id, Conversation.Status.DELETED])
        row = cursor.fetchone()
        if row is None:
            raise NotFound()
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} SET line_end = %s WHERE id = %s",
            [_prep(meta, "line_end", message_id), chat_id],
        )
    return int(row[0]), meta.get_field("line_end").to_python(row[1])


def auto_title(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()[: agent_settings.AUTO_TITLE_CHARS]


# -- live updates ---------------------------------------------------------------


def subscribe(ref: SessionRef, conversation_id: Any, channel_name: str, *, impersonated: bool) -> Conversation:
    """Add a Channels channel to the chat's group, only after the checks; the chat as it was read."""
    _scope, conversation = authorize_conversation(ref, conversation_id, impersonated=impersonated)
    async_to_sync(get_channel_layer().group_add)(topic(conversation.pk), channel_name)
    return conversation


def unsubscribe(conversation_id: Any, channel_name: str) -> None:
    async_to_sync(get_channel_layer().group_discard)(topic(conversation_id), channel_name)


# -- what a client sees ---------------------------------------------------------


def _client_rows(qs: QuerySet[Message] | Iterable[Message]) -> list[Message]:
    if isinstance(qs, QuerySet):
        qs = qs.select_related("confirmation")
    return list(qs)


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

    With ``versions`` (the chat has some), each message's ``versions`` are read too, in one more
    query; a chat that never had one costs nothing for them."""
    rows = list(messages)
    views = [client_view(m) for m in rows]
    asked = [view for view in views if view["role"] == Message.Role.USER]
    files = message_files(view["id"] for view in asked) if asked else {}
    for view in asked:
        view["files"] = files.get(view["id"], [])
    if versions and rows:
        siblings = _siblings(rows)
        for row, view in zip(rows, views, strict=True):
            view["versions"] = versions_view(row.pk, siblings.get(row.parent_id, []))
    return views


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


def versions_view(message_id: Any, siblings: list[Any]) -> dict[str, Any] | None:
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
    card = message.confirmation if message.confirmation_id else None
    if card is not None and message.role == Message.Role.TOOL:
        view["confirmation"] = {
            "id": str(card.id),
            "status": card.status,
            "preview": card.preview,
            "expires_at": card.expires_at.isoformat(),
        }
    elif card is not None:
        view["confirmation"] = {"id": str(card.id), "status": card.status}
    return view


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


def _clamp(limit: Any, maximum: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValidationError({"limit": _("The limit must be a positive integer.")}, code="min_value")
    return min(limit, maximum)


def staff_set_status(conversation_ids: Iterable[Any], status: str) -> int:
    """Staff's archive / delete / restore from the admin: one UPDATE, open tabs told.

    Archiving leaves a chat its user deleted as it is (and its purge timer running).
    """
    if status not in Conversation.Status.values:
        raise ValueError(status)
    ids = list(conversation_ids)
    rows = Conversation.objects.filter(pk__in=ids).exclude(status=status)
    if status == Conversation.Status.ARCHIVED:
        rows = rows.exclude(status=Conversation.Status.DELETED)  # only restore brings back a deleted chat
    with transaction.atomic():
        changed = rows.update(status=status, updated_at=timezone.now())
        for pk in ids:
            events.conversation_changed(pk)
    return changed
