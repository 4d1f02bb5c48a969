"""Stored files go with their rows, and no file waits forever to be read.

Whatever deletes an ``Attachment`` row (a removed file, a purged chat, a
deleted user, the nightly purge) also deletes its stored file, after the
deletion commits: a rolled-back delete keeps both.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone

from ..core import events
from ..core.conf import agent_settings
from ..core.ids import AttachmentId
from ..models import Attachment

logger = logging.getLogger(__name__)
BATCH = 500
STALLED_AFTER_TIMEOUTS = 10
"""A file still being read after this many ``EXTRACTION_TIMEOUT_S`` lost its reading with its worker."""


@receiver(post_delete, sender=Attachment)
def _delete_stored_file(sender: Any, instance: Attachment, **kwargs: Any) -> None:
    name, pk = instance.file.name, instance.pk  # the delete clears the instance's pk before the commit
    # A message's edited version shares its files (rows of the same chat): the last row takes the file.
    if name and not Attachment.objects.filter(conversation_id=instance.conversation_id, file=name).exists():
        storage = instance.file.storage
        transaction.on_commit(lambda: _delete_quietly(storage, name, pk))


def _delete_quietly(storage: Any, name: str, attachment_id: AttachmentId) -> None:
    try:
        storage.delete(name)
    except Exception as error:  # a storage outage leaves a file behind, never fails the delete
        logger.error(
            "agent: the stored file of deleted attachment %s could not be deleted (%s)",
            attachment_id,
            type(error).__name__,
        )


def purge_unlinked() -> int:
    """Delete files that never reached a message within ``UNLINKED_FILES_MAX_AGE_S``; how many."""
    before = timezone.now() - timedelta(seconds=agent_settings.UNLINKED_FILES_MAX_AGE_S)
    removed = 0
    while True:
        batch = list(
            Attachment.objects.filter(message__isnull=True, created_at__lt=before).values_list("pk", flat=True)[:BATCH]
        )
        if not batch:
            return removed
        with transaction.atomic():
            _total, by_model = (
                Attachment.objects.filter(pk__in=batch, message__isnull=True)
                .only("id", "file", "conversation")
                .delete()
            )
        removed += by_model.get(Attachment._meta.label, 0)


def fail_stalled() -> int:
    """Fail the files whose reading died with its worker, so the composer says so instead of
    waiting for them; how many. Reading one never takes longer than ``EXTRACTION_TIMEOUT_S``,
    so a file still pending after ``STALLED_AFTER_TIMEOUTS`` of them (a queue wait included)
    never will be read."""
    before = timezone.now() - timedelta(seconds=STALLED_AFTER_TIMEOUTS * agent_settings.EXTRACTION_TIMEOUT_S)
    stalled = Attachment.objects.filter(message__isnull=True, status=Attachment.Status.PENDING, created_at__lt=before)
    failed = 0
    for pk, conversation_id in stalled.values_list("pk", "conversation_id")[:BATCH]:
        with transaction.atomic():
            pending = Attachment.objects.filter(pk=pk, status=Attachment.Status.PENDING)
            if pending.update(status=Attachment.Status.FAILED, error_code="extraction_timeout"):
                events.attachment_processed(conversation_id, pk)
                failed += 1
    return failed
