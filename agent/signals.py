"""Tell open sockets to check their session again when it may have ended.

Channels reads the session once, at connect; these receivers make a logout,
a password change, a deactivation, a lost permission or a switched-off
assistant close the affected sockets within a second (SPEC §10).
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.dispatch import receiver

from . import events
from .access import SITE_GROUP, session_group, user_group
from .models import AgentSettings, Turn, UserSettings
from .turns import locks


@receiver(user_logged_out)
def _on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        events.session_ended(session_group(key), final=True)


@receiver(pre_save)
def _remember_credentials(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    if raw or sender is not get_user_model() or instance.pk is None:
        return
    instance._agent_before = sender._default_manager.filter(pk=instance.pk).values("password", "is_active").first()


@receiver(post_save)
def _on_user_change(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    """After the save (so a socket's re-check sees it): a new password or a deactivation."""
    before = instance.__dict__.pop("_agent_before", None)
    if raw or sender is not get_user_model() or not before:
        return
    if before["password"] != instance.password or (before["is_active"] and not instance.is_active):
        events.session_ended(user_group(instance.pk))


@receiver(m2m_changed)
def _on_permissions_change(sender: Any, instance: Any, action: str, **kwargs: Any) -> None:
    if action not in ("post_remove", "post_clear"):
        return
    user_model = get_user_model()
    if isinstance(instance, user_model):
        events.session_ended(user_group(instance.pk))
    elif isinstance(instance, Group) or sender in (user_model.groups.through, Group.permissions.through):
        events.session_ended(SITE_GROUP)


@receiver(post_save, sender=AgentSettings)
def _on_site_settings(sender: Any, instance: AgentSettings, **kwargs: Any) -> None:
    if not instance.enabled:
        events.session_ended(SITE_GROUP)


@receiver(post_save, sender=UserSettings)
def _on_user_settings(sender: Any, instance: UserSettings, **kwargs: Any) -> None:
    if instance.enabled is False:
        events.session_ended(user_group(instance.user_id))


@receiver(post_delete, sender=Turn)
def _release_deleted_turns_locks(sender: Any, instance: Turn, **kwargs: Any) -> None:
    """A turn deleted with its user or chat leaves no lock row behind (locks name their holder,
    not a foreign key)."""
    locks.release(instance)
