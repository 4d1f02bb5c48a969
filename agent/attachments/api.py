"""The user's files in a chat: add, remove, list, and what a client sees.

Every session-bound function runs the check ladder of ``agent.access`` first. Files go
through Django's storage API in chunks (a site on django-storages works
unchanged) and are read by ``agent.process_attachment`` once, on commit.
"""

from __future__ import annotations

import uuid
from typing import IO, Any, Iterable

from celery import current_app
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import transaction
from django.utils.translation import gettext as _

from ..access import Actor, Scope, authorize_session
from ..conversations import authorize_conversation, parse_uuid
from ..core.conf import agent_settings
from ..core.errors import FileGone, NotFound
from ..core.ids import AttachmentId, ConversationId
from ..limits import quotas
from ..models import Attachment, Conversation
from . import detection, downloads

PROCESS_TASK = "agent.process_attachment"


def refusal(code: str, message: str, field: str = "file") -> ValidationError:
    """A ``ValidationError`` on ``field`` whose ``code`` is also readable on the error itself."""
    error = ValidationError({field: ValidationError(message, code=code)})
    error.code = code
    return error


def add_attachment(
    actor: Actor, conversation_id: ConversationId, uploaded_file: Any, *, impersonated: bool
) -> Attachment:
    """Store the user's file in the chat's composer, ``pending`` until its text is read.

    ``TooManyUploads`` past ``UPLOADS_PER_MINUTE``, ``StorageFull`` past ``MAX_STORED_BYTES_PER_USER``.
    """
    scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    size = int(uploaded_file.size)
    limit = agent_settings.MAX_FILE_BYTES
    if size > limit:
        raise too_large(limit)
    name = detection.base_name(getattr(uploaded_file, "name", ""))
    content_type = detection.detect(name, _head(uploaded_file))
    if content_type is None or content_type not in agent_settings.ACCEPTED_TYPES:
        raise refusal("unsupported_type", _("This kind of file cannot be attached."))
    if _composer(conversation, scope).count() >= agent_settings.MAX_FILES_PER_MESSAGE:
        raise _too_many()
    quotas.check_upload(scope.user_id, size)  # refused before the file is stored; checked again below
    attachment = Attachment(
        id=uuid.uuid4(),
        user=scope.user,
        conversation=conversation,
        name=name,
        content_type=content_type,
        size=size,
        is_picture=detection.is_picture(content_type),
    )
    attachment.file.save(name, uploaded_file if isinstance(uploaded_file, File) else File(uploaded_file), save=False)
    try:
        with transaction.atomic():
            quotas.hold(scope.user_id)  # the user's uploads take turns, so the quotas below hold
            # the chat's row orders concurrent uploads, so the count below holds
            if not Conversation.objects.alive().select_for_update().filter(pk=conversation.pk).exists():
                raise NotFound()
            if _composer(conversation, scope).count() >= agent_settings.MAX_FILES_PER_MESSAGE:
                raise _too_many()
            quotas.check_upload(scope.user_id, size)
            attachment.save(force_insert=True)
            quotas.count_upload(scope.user_id)
            transaction.on_commit(lambda: queue_processing(attachment.pk))
    except BaseException:
        attachment.file.storage.delete(attachment.stored_as)
        raise
    return attachment


def too_large(limit: int) -> ValidationError:
    return refusal("file_too_large", _("The file is larger than %(max)d MB.") % {"max": limit // (1024 * 1024)})


def _too_many() -> ValidationError:
    return refusal(
        "too_many_files",
        _("At most %(max)d files per message.") % {"max": agent_settings.MAX_FILES_PER_MESSAGE},
    )


def queue_processing(attachment_id: AttachmentId) -> None:
    """Queue the file's one extraction by the task's stable name (ids in)."""
    current_app.send_task(PROCESS_TASK, args=[str(attachment_id)], queue=agent_settings.TASK_QUEUE)


def _head(uploaded_file: Any) -> bytes:
    """The file's first bytes, for its signature; the file is left at its start."""
    handle: IO[bytes] = uploaded_file.open("rb") if hasattr(uploaded_file, "open") else uploaded_file
    handle.seek(0)
    head = handle.read(detection.HEAD_BYTES)
    handle.seek(0)
    return head if isinstance(head, bytes) else head.encode()


def _composer(conversation: Conversation, scope: Scope) -> Any:
    return Attachment.objects.filter(conversation=conversation, user_id=scope.user_id, message__isnull=True)


def remove_attachment(actor: Actor, attachment_id: AttachmentId, *, impersonated: bool) -> None:
    """Remove an unlinked file of the user's own: the row, and the stored file after commit."""
    scope = authorize_session(actor, impersonated=impersonated)
    pk = parse_uuid(attachment_id)
    with transaction.atomic():
        row = (
            Attachment.objects.select_for_update()
            .filter(pk=pk, user_id=scope.user_id, message__isnull=True)
            .exclude(conversation__status=Conversation.Status.DELETED)
            .only("id", "file", "conversation_id")
            .first()
        )
        if row is None:
            raise FileGone()
        row.delete()


def list_unlinked(actor: Actor, conversation_id: ConversationId, *, impersonated: bool) -> list[Attachment]:
    """The chat's files waiting for a message (the composer's), oldest first."""
    scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    return list(_composer(conversation, scope).defer("text").order_by("created_at", "id"))


def open_file(actor: Actor, attachment_id: AttachmentId, *, impersonated: bool) -> tuple[Attachment, IO[bytes]]:
    """A ready file of the user's own, in a chat that is not deleted, opened for reading.

    A stored file that cannot be opened is ``NotFound`` too, and logged by ids.
    """
    scope = authorize_session(actor, impersonated=impersonated)
    pk = parse_uuid(attachment_id)
    row = (
        Attachment.objects.filter(pk=pk, user_id=scope.user_id, status=Attachment.Status.READY)
        .exclude(conversation__status=Conversation.Status.DELETED)
        .defer("text")
        .first()
    )
    if row is None:
        raise FileGone()
    try:
        return row, row.open_stored()
    except Exception as error:  # each storage fails in its own way (OSError, botocore's ClientError, ...)
        raise downloads.unreadable(row, error) from None


# -- the turn --------------------------------------------------------------------------


def for_turn(scope: Scope, conversation: Conversation, attachment_ids: Iterable[Any]) -> list[Attachment]:
    """The files a new turn takes: this chat's, this user's, ready and unlinked, in the order given.

    More than ``MAX_FILES_PER_MESSAGE`` is a ``ValidationError``; any other id
    (malformed, someone else's, pending, failed, already sent) is ``NotFound``.
    """
    ids = list(attachment_ids or ())
    if len(ids) > agent_settings.MAX_FILES_PER_MESSAGE:
        raise refusal(
            "too_many_files",
            _("At most %(max)d files per message.") % {"max": agent_settings.MAX_FILES_PER_MESSAGE},
            field="attachment_ids",
        )
    pks = list(dict.fromkeys(parse_uuid(i) for i in ids))
    if not pks:
        return []
    rows = {
        row.pk: row
        for row in Attachment.objects.filter(
            pk__in=pks,
            conversation=conversation,
            user_id=scope.user_id,
            status=Attachment.Status.READY,
            message__isnull=True,
        ).defer("text")
    }
    if len(rows) != len(pks):
        raise FileGone()
    return [rows[pk] for pk in pks]


def link(turn: Any, message: Any) -> list[Attachment]:
    """Link the turn's files to its stored user message; the files the user removed meanwhile are skipped.

    Call it inside the transaction that stores the message (fenced by the
    turn's lease), so a message and its files are stored together or not at all.
    """
    pks = [uuid.UUID(str(i)) for i in (turn.attachment_ids or [])]
    if not pks:
        return []
    rows = {
        row.pk: row
        for row in Attachment.objects.select_for_update().filter(
            pk__in=pks,
            conversation_id=turn.conversation_id,
            user_id=turn.user_id,
            status=Attachment.Status.READY,
            message__isnull=True,
        )
    }
    Attachment.objects.filter(pk__in=list(rows)).update(message=message)
    linked = [rows[pk] for pk in pks if pk in rows]
    for row in linked:
        row.message = message
    return linked
