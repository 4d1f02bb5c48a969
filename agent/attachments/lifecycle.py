"""Stored files go with their rows (SPEC §9, §11).

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

from ..conf import agent_settings
from ..models import Attachment

logger = logging.getLogger(__name__)
BATCH = 500


@receiver(post_delete, sender=Attachment)
def _delete_stored_file(sender: Any, instance: Attachment, **kwargs: Any) -> None:
    name = instance.file.name
    if name:
        storage = instance.file.storage
        transaction.on_commit(lambda: _delete_quietly(storage, name))


def _delete_quietly(storage: Any, name: str) -> None:
    try:
        storage.delete(name)
    except Exception as error:  # a storage outage leaves a file behind, never fails the delete
        logger.error("agent: a stored file could not be deleted (%s)", type(error).__name__)


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
            _total, by_model = Attachment.objects.filter(pk__in=batch, message__isnull=True).only("id", "file").delete()
        removed += by_model.get(Attachment._meta.label, 0)
