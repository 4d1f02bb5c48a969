"""Life cycle: chats past their retention, and soft-deleted chats, are purged; so are quota uses no quota counts."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from .core.conf import agent_settings
from .limits import quotas
from .models import Conversation


def purge() -> int:
    """Delete the chats due for deletion, with their messages and cards; how many chats.

    The uses a per-minute quota counted go too once they are older than its minute."""
    now = timezone.now()
    due = Q(status=Conversation.Status.DELETED, updated_at__lt=now - timedelta(days=agent_settings.PURGE_DELETED_DAYS))
    if agent_settings.RETENTION_DAYS:
        due |= Q(last_message_at__lt=now - timedelta(days=agent_settings.RETENTION_DAYS))
    _total, by_model = Conversation.objects.filter(due).delete()
    quotas.forget_old_uses()
    return by_model.get(Conversation._meta.label, 0)
