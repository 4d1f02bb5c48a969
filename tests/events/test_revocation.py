"""A revocation closes the session's open sockets: signals within a second, the rest by the re-check.

Every way a right is lost is covered: each side of each m2m relation that
grants ``agent.use_agent`` (remove and clear), the user's own flags, the
switches, and the paths that send no signal at all.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from agent.access import SessionRef
from agent.models import AgentSettings, UserSettings
from tests.support.factories import UserFactory
from tests.support.sessions import login
from tests.support.sockets import close_code, error_frame, opened, parsed, subscribed

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]

SIGNAL_CLOSE_S = 1.0  # a revoked session's sockets close within a second


def use_agent() -> Permission:
    return Permission.objects.get(content_type__app_label="agent", codename="use_agent")


@pytest.fixture
def member(db: Any) -> tuple[Any, Group]:
    """A user who may use the assistant only through their group."""
    user = UserFactory()
    group = Group.objects.create(name="assistants")
    group.permissions.add(use_agent())
    user.groups.add(group)
    return get_user_model().objects.get(pk=user.pk), group


def _log_out(client: Client, user: Any) -> None:
    client.logout()


def _change_password(client: Client, user: Any) -> None:
    user.set_password("another-password")
    user.save()


def _deactivate(client: Client, user: Any) -> None:
    user.is_active = False
    user.save()


def _delete_user(client: Client, user: Any) -> None:
    user.delete()


def _remove_permission(client: Client, user: Any) -> None:
    user.user_permissions.remove(use_agent())


def _remove_user_from_permission(client: Client, user: Any) -> None:
    use_agent().user_set.remove(user)


def _clear_users_permissions(client: Client, user: Any) -> None:
    user.user_permissions.clear()


def _clear_permissions_users(client: Client, user: Any) -> None:
    use_agent().user_set.clear()


def _delete_permission(client: Client, user: Any) -> None:
    use_agent().delete()


def _switch_assistant_off(client: Client, user: Any) -> None:
    row = AgentSettings.current()
    row.enabled = False
    row.save()


def _switch_user_off(client: Client, user: Any) -> None:
    UserSettings.objects.update_or_create(user=user, defaults={"enabled": False})


REVOCATIONS: dict[str, tuple[Callable[[Client, Any], None], str]] = {
    "logout": (_log_out, "session_gone"),
    "password_changed": (_change_password, "session_gone"),
    "deactivated": (_deactivate, "inactive"),
    "user_deleted": (_delete_user, "session_gone"),
    "user.user_permissions.remove": (_remove_permission, "forbidden"),
    "permission.user_set.remove": (_remove_user_from_permission, "forbidden"),
    "user.user_permissions.clear": (_clear_users_permissions, "forbidden"),
    "permission.user_set.clear": (_clear_permissions_users, "forbidden"),
    "permission.delete": (_delete_permission, "forbidden"),
    "assistant_switched_off": (_switch_assistant_off, "forbidden"),
    "user_switched_off": (_switch_user_off, "forbidden"),
}


async def _closes_within_a_second(client: Client, revoke: Callable[[], None], code_sent: str, chat: Any = None) -> None:
    ws = await opened(client)
    if chat is not None:
        await subscribed(ws, chat)
    await sync_to_async(revoke)()
    code, frames = await close_code(ws, within=SIGNAL_CLOSE_S)
    assert code == 4401
    assert parsed(frames) == [error_frame(code_sent)]
    await ws.disconnect()


@pytest.mark.parametrize("revocation", REVOCATIONS)
async def test_a_revocation_closes_the_open_socket_4401_within_a_second(
    session: tuple[Client, SessionRef], user: Any, chat: Any, revocation: str
) -> None:
    client = session[0]
    revoke, code_sent = REVOCATIONS[revocation]
    await _closes_within_a_second(client, lambda: revoke(client, user), code_sent, chat)


def _group_loses_permission(user: Any, group: Group) -> None:
    group.permissions.remove(use_agent())


def _permission_leaves_group(user: Any, group: Group) -> None:
    use_agent().group_set.remove(group)


def _group_permissions_cleared(user: Any, group: Group) -> None:
    group.permissions.clear()


def _permission_groups_cleared(user: Any, group: Group) -> None:
    use_agent().group_set.clear()


def _user_leaves_group(user: Any, group: Group) -> None:
    user.groups.remove(group)


def _group_drops_user(user: Any, group: Group) -> None:
    group.user_set.remove(user)


def _users_groups_cleared(user: Any, group: Group) -> None:
    user.groups.clear()


def _groups_users_cleared(user: Any, group: Group) -> None:
    group.user_set.clear()


def _group_deleted(user: Any, group: Group) -> None:
    group.delete()


def _groups_permission_deleted(user: Any, group: Group) -> None:
    use_agent().delete()


GROUP_REVOCATIONS = {
    "group.permissions.remove": _group_loses_permission,
    "permission.group_set.remove": _permission_leaves_group,
    "group.permissions.clear": _group_permissions_cleared,
    "permission.group_set.clear": _permission_groups_cleared,
    "user.groups.remove": _user_leaves_group,
    "group.user_set.remove": _group_drops_user,
    "user.groups.clear": _users_groups_cleared,
    "group.user_set.clear": _groups_users_cleared,
    "group.delete": _group_deleted,
    "group's permission.delete": _groups_permission_deleted,
}


@pytest.mark.parametrize("revocation", GROUP_REVOCATIONS)
async def test_losing_the_permission_through_a_group_closes_the_socket_within_a_second(
    member: tuple[Any, Group], revocation: str
) -> None:
    user, group = member
    client, _ref = await sync_to_async(login)(user)
    await _closes_within_a_second(client, lambda: GROUP_REVOCATIONS[revocation](user, group), "forbidden")


async def test_a_superuser_who_is_demoted_is_closed_within_a_second(db: Any) -> None:
    user = await sync_to_async(UserFactory)(is_superuser=True)
    client, _ref = await sync_to_async(login)(user)

    def demote() -> None:
        user.is_superuser = False
        user.save()

    await _closes_within_a_second(client, demote, "forbidden")


async def test_a_permission_lost_by_another_user_leaves_the_socket_open(
    session: tuple[Client, SessionRef], make_user: Callable[..., Any]
) -> None:
    other = await sync_to_async(make_user)()
    ws = await opened(session[0])
    await sync_to_async(lambda: use_agent().user_set.remove(other))()
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


async def test_a_logout_does_not_close_another_sessions_socket(
    session: tuple[Client, SessionRef], user: Any, chat: Any
) -> None:
    other_client, _ref = await sync_to_async(login)(user)
    ws = await opened(other_client)
    await sync_to_async(session[0].logout)()
    assert await ws.receive_nothing(timeout=0.5)
    await subscribed(ws, chat)
    await ws.disconnect()


# -- no signal: the socket's own re-check ------------------------------------------------------

RECHECK_S = 1


@pytest.fixture
def quick_recheck(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "SOCKET_RECHECK_S": RECHECK_S}


def _session_row_deleted(client: Client, user: Any) -> None:
    Session.objects.filter(session_key=client.session.session_key).delete()


def _session_expired(client: Client, user: Any) -> None:
    Session.objects.filter(session_key=client.session.session_key).update(expire_date=timezone.now())


def _permission_row_deleted(client: Client, user: Any) -> None:
    type(user).user_permissions.through.objects.filter(user=user).delete()


def _assistant_updated_off(client: Client, user: Any) -> None:
    AgentSettings.current()
    AgentSettings.objects.update(enabled=False)


def _session_marked_impersonated(client: Client, user: Any) -> None:
    store = client.session  # the same session, as django-hijack marks it
    store["hijack_history"] = ["1"]
    store.save()


SILENT = {
    "session_marked_impersonated": (_session_marked_impersonated, "impersonated"),
    "session_row_deleted": (_session_row_deleted, "session_gone"),
    "session_expired": (_session_expired, "session_gone"),
    "permission_row_deleted": (_permission_row_deleted, "forbidden"),
    "assistant_updated_off": (_assistant_updated_off, "forbidden"),
}


@pytest.mark.parametrize("revocation", SILENT)
async def test_a_revocation_without_a_signal_closes_the_idle_socket_within_the_recheck_interval(
    quick_recheck: None, session: tuple[Client, SessionRef], user: Any, chat: Any, revocation: str
) -> None:
    client = session[0]
    revoke, code_sent = SILENT[revocation]
    ws = await opened(client)
    await subscribed(ws, chat)
    await sync_to_async(revoke)(client, user)
    code, frames = await close_code(ws, within=RECHECK_S + 2)
    assert code == 4401 and parsed(frames) == [error_frame(code_sent)]
    await ws.disconnect()


async def test_a_frame_after_the_session_is_marked_impersonated_is_refused_and_closes_4401(
    session: tuple[Client, SessionRef], chat: Any
) -> None:
    client = session[0]
    ws = await opened(client)
    await sync_to_async(_session_marked_impersonated)(client, None)
    await ws.send_json_to({"type": "subscribe", "conversation": str(chat.pk), "ref": 1})
    code, frames = await close_code(ws, within=5)
    assert code == 4401 and parsed(frames) == [error_frame("impersonated", ref=1)]
    await ws.disconnect()


async def test_a_cached_session_evicted_closes_the_idle_socket(
    quick_recheck: None, settings: Any, make_user: Callable[..., Any]
) -> None:
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    user = await sync_to_async(make_user)()
    client, _ref = await sync_to_async(login)(user)
    ws = await opened(client)
    await sync_to_async(cache.clear)()
    code, frames = await close_code(ws, within=RECHECK_S + 2)
    assert code == 4401 and parsed(frames) == [error_frame("session_gone")]
    await ws.disconnect()


async def test_an_idle_socket_of_a_live_session_stays_open_through_its_rechecks(
    quick_recheck: None, session: tuple[Client, SessionRef]
) -> None:
    ws = await opened(session[0])
    assert await ws.receive_nothing(timeout=RECHECK_S * 2.5)
    await ws.disconnect()


async def test_each_socket_checks_again_by_itself_until_it_closes(
    quick_recheck: None, session: tuple[Client, SessionRef]
) -> None:
    def watchers() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if "Feed._watch" in repr(t.get_coro())]

    sockets = [await opened(session[0]) for _ in range(3)]
    assert len(watchers()) == 3
    for ws in sockets:
        await ws.disconnect()
    await asyncio.sleep(0)
    assert watchers() == []
