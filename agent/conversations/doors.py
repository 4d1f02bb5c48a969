"""The chats and messages of the assistant, one door per operation.

Every public function takes an actor (a ``SessionRef`` or a ``TelegramRef``) first and a keyword-only
``impersonated`` flag with no default, runs the checks of ``agent.access``,
and answers "not there" and "not yours" with the same ``NotFound``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from ..access import Actor, Scope, authorize_session
from ..core import events
from ..core.conf import agent_settings
from ..core.errors import InvalidCursor, NotFound
from ..core.ids import ConversationId, MessageId
from ..limits import quotas
from ..models import Attachment, Conversation, Message
from .payloads import client_views, conversation_view
from .store import append_message, column_of, db_value

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


def owned_conversation(scope: Scope, conversation_id: ConversationId) -> Conversation:
    """The session user's live chat, or ``NotFound`` whatever the reason."""
    pk = parse_uuid(conversation_id)
    try:
        return Conversation.objects.alive().get(pk=pk, user_id=scope.user_id)
    except Conversation.DoesNotExist:
        raise NotFound() from None


def authorize_conversation(
    actor: Actor, conversation_id: ConversationId, *, impersonated: bool
) -> tuple[Scope, Conversation]:
    """The access checks, then that the chat is the session user's and not deleted."""
    scope = authorize_session(actor, impersonated=impersonated)
    return scope, owned_conversation(scope, conversation_id)


def create_conversation(actor: Actor, attrs: Mapping[str, Any], *, impersonated: bool) -> Conversation:
    """A new empty active chat of the session's user; only ``title`` is read.

    ``TooManyChats`` past ``NEW_CHATS_PER_MINUTE``.
    """
    scope = authorize_session(actor, impersonated=impersonated)
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
    actor: Actor,
    *,
    impersonated: bool,
    archived: bool = False,
    limit: int = PAGE_SIZE,
    cursor: str | None = None,
) -> Page:
    """Active chats (with ``archived=True``, the archived ones), newest ``last_message_at`` first,
    one keyset page (``CHATS_PAGE``) at a time."""
    scope = authorize_session(actor, impersonated=impersonated)
    status = Conversation.Status.ARCHIVED if archived else Conversation.Status.ACTIVE
    return _keyset_page(Conversation.objects.filter(user_id=scope.user_id, status=status), limit, cursor)


SEARCH_MAX_CHARS = 200


def search_conversations(
    actor: Actor, query: Any, *, impersonated: bool, limit: int = PAGE_SIZE, cursor: str | None = None
) -> Page:
    """The user's chats, active and archived, whose title or text matches ``query``; pages as
    ``list_conversations``.

    PostgreSQL's full-text search with the ``simple`` configuration (whole words in any
    language); elsewhere a plain case-insensitive substring.
    """
    scope = authorize_session(actor, impersonated=impersonated)
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


def get_conversation(actor: Actor, conversation_id: ConversationId, *, impersonated: bool) -> dict[str, Any]:
    """The chat with the messages of its active line, oldest first, as a client sees them."""
    _scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    messages = _client_rows(conversation.messages.filter(active=True).order_by("seq"))
    return {**conversation_view(conversation), "messages": client_views(messages, versions=conversation.has_versions)}


def rename_conversation(
    actor: Actor, conversation_id: ConversationId, title: Any, *, impersonated: bool
) -> Conversation:
    """Rename; a blank title or one over the maximum is a ``ValidationError``."""
    scope = authorize_session(actor, impersonated=impersonated)
    pk = parse_uuid(conversation_id)
    title = _clean_title(title)
    return _update_owned(scope, pk, title=title)


def archive_conversation(actor: Actor, conversation_id: ConversationId, *, impersonated: bool) -> Conversation:
    """Take the chat out of the list; it can still be opened and written to."""
    scope = authorize_session(actor, impersonated=impersonated)
    return _update_owned(scope, parse_uuid(conversation_id), status=Conversation.Status.ARCHIVED)


def restore_conversation(actor: Actor, conversation_id: ConversationId, *, impersonated: bool) -> Conversation:
    """An archived chat back in the list: one conditional UPDATE, which never brings back a deleted one."""
    scope = authorize_session(actor, impersonated=impersonated)
    return _update_owned(scope, parse_uuid(conversation_id), status=Conversation.Status.ACTIVE)


def delete_conversation(actor: Actor, conversation_id: ConversationId, *, impersonated: bool) -> Conversation:
    """Soft delete: the rows stay, every function here treats the chat as missing."""
    scope = authorize_session(actor, impersonated=impersonated)
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


def _clean_title(title: object) -> str:
    if not isinstance(title, str) or not title.strip():
        raise ValidationError({"title": _("The title cannot be blank.")}, code="blank")
    title = title.strip()
    if len(title) > agent_settings.MAX_TITLE_CHARS:
        raise ValidationError(
            {"title": _("The title can be at most %(max)d characters.") % {"max": agent_settings.MAX_TITLE_CHARS}},
            code="max_length",
        )
    return title


def get_message(
    actor: Actor, conversation_id: ConversationId, message_id: MessageId, *, impersonated: bool
) -> dict[str, Any]:
    """One message of the user's chat, as a client sees it; one off the active line too (``active`` False)."""
    return message_view(authorize_session(actor, impersonated=impersonated), conversation_id, message_id)


def message_view(scope: Scope, conversation_id: ConversationId, message_id: MessageId) -> dict[str, Any]:
    """``get_message`` for a scope checked just now: the sockets of one user share it.

    One plain statement (the user's live chat joined to the message): every
    open tab waits for it, and the ORM takes longer to build the query than
    PostgreSQL to answer it. Its uuids go in as the database stores them (text
    on SQLite). A card's message reads its card after.
    """
    rows = list(
        Message.objects.raw(
            _message_of_live_conversation(),
            [
                db_value(Message._meta, "id", parse_uuid(message_id)),
                db_value(Conversation._meta, "id", parse_uuid(conversation_id)),
                scope.user_id,
                Conversation.Status.DELETED,
            ],
        )
    )
    if not rows:
        raise NotFound()
    return client_views(rows, versions=rows[0].agent_has_versions)[0]  # type: ignore[attr-defined]  # the query's


@functools.cache
def _message_of_live_conversation() -> str:
    quote = connection.ops.quote_name
    return (
        f"SELECT m.*, c.{quote(column_of(Conversation, 'has_versions'))} AS agent_has_versions, "
        f"EXISTS (SELECT 1 FROM {quote(Attachment._meta.db_table)} a WHERE a.{quote(column_of(Attachment, 'message'))} "
        f"= m.{quote(column_of(Message, 'id'))}) AS agent_has_files "
        f"FROM {quote(Message._meta.db_table)} m "
        f"JOIN {quote(Conversation._meta.db_table)} c ON c.{quote(column_of(Conversation, 'id'))} = "
        f"m.{quote(column_of(Message, 'conversation'))} "
        f"WHERE m.{quote(column_of(Message, 'id'))} = %s AND c.{quote(column_of(Conversation, 'id'))} = %s "
        f"AND c.{quote(column_of(Conversation, 'user'))} = %s "
        f"AND c.{quote(column_of(Conversation, 'status'))} <> %s"
    )


def list_messages(
    actor: Actor,
    conversation_id: ConversationId,
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
    _scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
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


def _cursor_seq(conversation: Conversation, message_id: MessageId) -> int:
    try:
        pk = parse_uuid(message_id)
    except NotFound:
        raise InvalidCursor() from None
    seq = Message.objects.filter(conversation=conversation, pk=pk).values_list("seq", flat=True).first()
    if seq is None:
        raise InvalidCursor()
    return seq


def add_message(
    actor: Actor, conversation_id: ConversationId, attrs: Mapping[str, Any], *, impersonated: bool
) -> Message:
    """Store the user's own text; every key of ``attrs`` but ``content`` is ignored."""
    scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
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


def subscribe(actor: Actor, conversation_id: ConversationId, channel_name: str, *, impersonated: bool) -> Conversation:
    """Add a Channels channel to the chat's group, only after the checks; the chat as it was read."""
    _scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    async_to_sync(get_channel_layer().group_add)(topic(conversation.pk), channel_name)
    return conversation


def unsubscribe(conversation_id: ConversationId, channel_name: str) -> None:
    async_to_sync(get_channel_layer().group_discard)(topic(conversation_id), channel_name)


def _client_rows(qs: QuerySet[Message] | Iterable[Message]) -> list[Message]:
    if isinstance(qs, QuerySet):
        qs = qs.select_related("confirmation")
    return list(qs)


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
