"""Tell open sockets that their session may have ended.

Channels reads the session once, at connect; these receivers make a logout,
a password change, a deactivation, a lost permission (however it was lost)
or a switched-off assistant close the affected sockets within a second.
What sends no signal (a session row deleted or expired, a
permission changed by a raw query) is caught by each socket's own check
every ``SOCKET_RECHECK_S``.
"""

from __future__ import annotations

from typing import Any, Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from .core import events
from .core.events import SITE_GROUP, session_group, user_group
from .models import AgentSettings, Turn, UserSettings
from .turns import locks

MANY_USERS = 200
"""Past this many users touched by one change, every socket checks again instead."""


@receiver(user_logged_out)
def _on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        events.session_ended(session_group(key), final="session_gone")


@receiver(pre_save)
def _remember_credentials(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    if raw or sender is not get_user_model() or instance.pk is None:
        return
    fields = ["password", "is_active"] + (["is_superuser"] if hasattr(instance, "is_superuser") else [])
    instance._agent_before = sender._default_manager.filter(pk=instance.pk).values(*fields).first()


@receiver(post_save)
def _on_user_change(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    """After the save (so a socket's check sees it): a new password, a deactivation, a lost superuser flag."""
    before = instance.__dict__.pop("_agent_before", None)
    if raw or sender is not get_user_model() or not before:
        return
    if before["is_active"] and not instance.is_active:
        events.session_ended(user_group(instance.pk), final="inactive")
    elif before["password"] != instance.password or (before.get("is_superuser") and not instance.is_superuser):
        events.session_ended(user_group(instance.pk))


@receiver(post_delete)
def _on_user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    if sender is get_user_model():
        events.session_ended(user_group(instance.pk), final="session_gone")


@receiver(m2m_changed)
def _on_rights_removed(
    sender: Any, instance: Any, action: str, reverse: bool, model: Any, pk_set: set[Any] | None, **kwargs: Any
) -> None:
    """Any removal from a user's permissions, their groups, or a group's permissions, from either side.

    ``user.user_permissions.remove(p)`` and ``p.user_set.remove(user)`` are the
    same change seen from two ends; a clear names no rows, so its users are
    read before it.
    """
    relation = _rights_relation(sender)
    if relation is None or action not in ("pre_clear", "post_remove", "post_clear"):
        return
    if action == "pre_clear":
        instance._agent_cleared = _users_touched(relation, instance, reverse, None, clearing=True)
        return
    if action == "post_clear":
        users = instance.__dict__.pop("_agent_cleared", None)
    else:
        users = _users_touched(relation, instance, reverse, pk_set, clearing=False)
    _recheck(users)


@receiver(pre_delete, sender=Group)
@receiver(pre_delete, sender=Permission)
def _remember_rights_holders(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A deleted group or permission takes its grants with it and Django sends no ``m2m_changed``
    for that cascade: its holders are read now, while its rows still name them."""
    if sender is Group:
        instance._agent_holders = _members_of([instance.pk])
        return
    direct = getattr(instance, "user_set", None)  # absent for a user model without permissions
    users = set(direct.values_list("pk", flat=True)[: MANY_USERS + 1]) if direct is not None else set()
    members = _members_of(list(instance.group_set.values_list("pk", flat=True)))
    instance._agent_holders = None if members is None else users | members


@receiver(post_delete, sender=Group)
@receiver(post_delete, sender=Permission)
def _on_rights_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    """The holders of a deleted group or permission check their sessions once the deletion is committed."""
    if "_agent_holders" in instance.__dict__:
        _recheck(instance.__dict__.pop("_agent_holders"))


@receiver(post_save, sender=AgentSettings)
def _on_site_settings(sender: Any, instance: AgentSettings, **kwargs: Any) -> None:
    if not instance.enabled:
        events.session_ended(SITE_GROUP, final="forbidden")


@receiver(post_save, sender=UserSettings)
def _on_user_settings(sender: Any, instance: UserSettings, **kwargs: Any) -> None:
    if instance.enabled is False:
        events.session_ended(user_group(instance.user_id), final="forbidden")


def _rights_relation(sender: Any) -> str | None:
    """Which of the three relations that grant rights ``sender`` (an m2m through model) is."""
    user_model = get_user_model()
    relations = {
        "user_permissions": getattr(getattr(user_model, "user_permissions", None), "through", None),
        "groups": getattr(getattr(user_model, "groups", None), "through", None),
        "group_permissions": Group.permissions.through,
    }
    return next((name for name, through in relations.items() if through is not None and sender is through), None)


def _users_touched(relation: str, instance: Any, reverse: bool, pk_set: Iterable[Any] | None, *, clearing: bool) -> Any:
    """The ids of the users whose rights the change may have cut, or None for "maybe everyone"."""
    if relation in ("user_permissions", "groups") and not reverse:
        return {instance.pk}  # user.user_permissions / user.groups
    if relation == "user_permissions":  # permission.user_set
        return set(pk_set or ()) if not clearing else set(instance.user_set.values_list("pk", flat=True))
    if relation == "groups":  # group.user_set
        return set(pk_set or ()) if not clearing else set(instance.user_set.values_list("pk", flat=True))
    if not reverse:  # group.permissions: the group's members
        groups: Any = [instance.pk]
    elif clearing:  # permission.group_set.clear(): the groups that held it
        groups = list(instance.group_set.values_list("pk", flat=True))
    else:  # permission.group_set
        groups = list(pk_set or [])
    return _members_of(groups)


def _members_of(groups: list[Any]) -> set[Any] | None:
    """The ids of the groups' members, or None for "maybe everyone" (past ``MANY_USERS``)."""
    if not groups:
        return set()
    user_model = get_user_model()
    if not hasattr(user_model, "groups"):
        return set()
    members = user_model._default_manager.filter(groups__in=groups).values_list("pk", flat=True).distinct()
    found = set(members[: MANY_USERS + 1])
    return None if len(found) > MANY_USERS else found


def _recheck(users: Any) -> None:
    if users is None or len(users) > MANY_USERS:
        events.session_ended(SITE_GROUP)
        return
    for user_id in sorted(users):
        events.session_ended(user_group(user_id))


@receiver(post_delete, sender=Turn)
def _release_deleted_turns_locks(sender: Any, instance: Turn, **kwargs: Any) -> None:
    """A turn deleted with its user or chat leaves no lock row behind (locks name their holder,
    not a foreign key)."""
    locks.release(instance)
