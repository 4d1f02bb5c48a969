"""The access ladder, for every session-bound door of ``agent.conversations``.

Each door is called in every refused state; the refusal must be the right
one and nothing may be written (the chats, their messages, the channel
groups).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from importlib import import_module
from typing import Any, Callable

import pytest
from django.conf import settings as django_settings
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from agent import conversations
from agent.access import Scope, SessionRef, authorize_session
from agent.core import errors
from agent.models import AgentSettings, Conversation, Message
from tests.support.factories import ConversationFactory, UserFactory, UserSettingsFactory
from tests.support.layer import Listener
from tests.support.sessions import grant

pytestmark = pytest.mark.django_db


def unconfirmed(user: Any, session_data: dict[str, Any]) -> str | None:
    """A site's scope check: this site wants a confirmed e-mail first."""
    return "unconfirmed"


def passes(user: Any, session_data: dict[str, Any]) -> str | None:
    return None


@dataclass
class World:
    client: Client
    ref: SessionRef
    user: Any
    chat: Conversation
    message: Message
    listener: Listener


@pytest.fixture
def world(session: tuple[Client, SessionRef], user: Any) -> World:
    client, ref = session
    chat = conversations.create_conversation(ref, {"title": "mine"}, impersonated=False)
    message = conversations.add_message(ref, chat.pk, {"content": "hello"}, impersonated=False)
    return World(client, ref, user, chat, message, Listener())


Door = Callable[..., Any]

DOORS: dict[str, Callable[[World, SessionRef], Door]] = {
    "authorize_session": lambda w, r: lambda **kw: authorize_session(r, **kw),
    "create_conversation": lambda w, r: lambda **kw: conversations.create_conversation(r, {"title": "new"}, **kw),
    "list_conversations": lambda w, r: lambda **kw: conversations.list_conversations(r, **kw),
    "get_conversation": lambda w, r: lambda **kw: conversations.get_conversation(r, w.chat.pk, **kw),
    "get_message": lambda w, r: lambda **kw: conversations.get_message(r, w.chat.pk, w.message.pk, **kw),
    "list_messages": lambda w, r: lambda **kw: conversations.list_messages(r, w.chat.pk, **kw),
    "add_message": lambda w, r: lambda **kw: conversations.add_message(r, w.chat.pk, {"content": "more"}, **kw),
    "rename_conversation": lambda w, r: lambda **kw: conversations.rename_conversation(r, w.chat.pk, "renamed", **kw),
    "archive_conversation": lambda w, r: lambda **kw: conversations.archive_conversation(r, w.chat.pk, **kw),
    "delete_conversation": lambda w, r: lambda **kw: conversations.delete_conversation(r, w.chat.pk, **kw),
    "subscribe": lambda w, r: lambda **kw: conversations.subscribe(r, w.chat.pk, w.listener.name, **kw),
}


# -- the refused states: each changes the world and returns the ref to call with --------


def _session_deleted(w: World, settings: Any) -> SessionRef:
    engine = import_module(django_settings.SESSION_ENGINE)
    engine.SessionStore(session_key=w.ref.session_key).delete()
    return w.ref


def _session_expired(w: World, settings: Any) -> SessionRef:
    Session.objects.filter(session_key=w.ref.session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    return w.ref


def _logged_out(w: World, settings: Any) -> SessionRef:
    w.client.logout()
    return w.ref


def _password_changed(w: World, settings: Any) -> SessionRef:
    w.user.set_password("a-new-password")
    w.user.save()
    return w.ref


def _user_deleted(w: World, settings: Any) -> SessionRef:
    w.user.delete()
    return w.ref


def _other_user(w: World, settings: Any) -> SessionRef:
    return SessionRef(session_key=w.ref.session_key, user_id=UserFactory().pk)


def _inactive(w: World, settings: Any) -> SessionRef:
    w.user.is_active = False
    w.user.save()
    return w.ref


def _assistant_off(w: World, settings: Any) -> SessionRef:
    AgentSettings.objects.update_or_create(pk=1, defaults={"enabled": False})
    return w.ref


def _no_permission(w: World, settings: Any) -> SessionRef:
    w.user.user_permissions.clear()
    return w.ref


def _user_switched_off(w: World, settings: Any) -> SessionRef:
    UserSettingsFactory(user=w.user, enabled=False)
    return w.ref


def _scope_check_says_unconfirmed(w: World, settings: Any) -> SessionRef:
    settings.AGENT = {**settings.AGENT, "SCOPE_CHECKS": ["tests.access.test_ladder.unconfirmed"]}
    return w.ref


REFUSED_STATES = {
    "session_deleted": (_session_deleted, "session_gone"),
    "session_expired": (_session_expired, "session_gone"),
    "logged_out": (_logged_out, "session_gone"),
    "password_changed": (_password_changed, "session_gone"),
    "user_deleted": (_user_deleted, "session_gone"),
    "session_of_another_user": (_other_user, "mismatch"),
    "user_inactive": (_inactive, "inactive"),
    "assistant_switched_off": (_assistant_off, "forbidden"),
    "no_use_agent_permission": (_no_permission, "forbidden"),
    "user_settings_disabled": (_user_switched_off, "forbidden"),
    "scope_check_unconfirmed": (_scope_check_says_unconfirmed, "unconfirmed"),
}

CODE_CLASSES = {
    "session_gone": errors.SessionGone,
    "mismatch": errors.Mismatch,
    "inactive": errors.Inactive,
    "forbidden": errors.Forbidden,
    "unconfirmed": errors.ScopeRefused,
}


def snapshot() -> tuple[list[Any], list[Any]]:
    """Everything a door could write to the database."""
    chats = list(
        Conversation.objects.order_by("pk").values_list("pk", "title", "status", "message_count", "last_message_at")
    )
    messages = list(Message.objects.order_by("pk").values_list("pk", "seq", "content"))
    return chats, messages


def assert_not_subscribed(w: World) -> None:
    assert not w.listener.hears(conversations.topic(w.chat.pk))


# -- tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
def test_a_live_session_passes_the_door(world: World, door: str) -> None:
    result = DOORS[door](world, world.ref)(impersonated=False)
    if door == "authorize_session":
        assert isinstance(result, Scope) and result.user_id == world.user.pk
    if door == "subscribe":
        assert world.listener.hears(conversations.topic(world.chat.pk))


@pytest.mark.parametrize("door", DOORS)
def test_calling_a_door_without_impersonated_is_a_type_error(world: World, door: str) -> None:
    before = snapshot()
    with pytest.raises(TypeError, match="impersonated"):
        DOORS[door](world, world.ref)()
    assert snapshot() == before


@pytest.mark.parametrize("door", DOORS)
def test_impersonated_is_refused_first_and_writes_nothing(world: World, door: str) -> None:
    before = snapshot()
    with pytest.raises(errors.Impersonated) as refused:
        DOORS[door](world, world.ref)(impersonated=True)
    assert refused.value.code == "impersonated"
    assert snapshot() == before
    if door == "subscribe":
        assert_not_subscribed(world)


@pytest.mark.parametrize("door", DOORS)
def test_impersonated_is_refused_even_when_the_session_is_gone(world: World, door: str, settings: Any) -> None:
    ref = _session_deleted(world, settings)
    before = snapshot()
    with pytest.raises(errors.Impersonated):
        DOORS[door](world, ref)(impersonated=True)
    assert snapshot() == before


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("state", REFUSED_STATES)
def test_a_refused_session_gets_its_code_and_writes_nothing(world: World, door: str, state: str, settings: Any) -> None:
    change, code = REFUSED_STATES[state]
    ref = change(world, settings)
    before = snapshot()
    with pytest.raises(CODE_CLASSES[code]) as refused:
        DOORS[door](world, ref)(impersonated=False)
    assert refused.value.code == code
    assert snapshot() == before
    if door == "subscribe":
        assert_not_subscribed(world)


def test_a_scope_check_that_returns_none_lets_the_session_pass(world: World, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "SCOPE_CHECKS": ["tests.access.test_ladder.passes"]}
    assert authorize_session(world.ref, impersonated=False).user_id == world.user.pk


def test_user_settings_enabled_none_means_on(world: World) -> None:
    UserSettingsFactory(user=world.user, enabled=None)
    assert authorize_session(world.ref, impersonated=False).user_id == world.user.pk


def test_a_user_given_back_the_permission_passes_again_on_the_next_call(world: World) -> None:
    _no_permission(world, None)
    with pytest.raises(errors.Forbidden):
        authorize_session(world.ref, impersonated=False)
    grant(world.user, "agent.use_agent")
    assert authorize_session(world.ref, impersonated=False).user_id == world.user.pk


# -- the order of the rungs ------------------------------------------------------------------


def test_a_gone_session_is_session_gone_even_when_the_assistant_is_off(world: World, settings: Any) -> None:
    _assistant_off(world, settings)
    with pytest.raises(errors.SessionGone):
        authorize_session(_session_deleted(world, settings), impersonated=False)


def test_an_inactive_user_is_inactive_even_when_the_assistant_is_off(world: World, settings: Any) -> None:
    _assistant_off(world, settings)
    with pytest.raises(errors.Inactive):
        authorize_session(_inactive(world, settings), impersonated=False)


def test_a_mismatched_session_is_mismatch_even_when_its_user_is_inactive(world: World, settings: Any) -> None:
    _inactive(world, settings)
    with pytest.raises(errors.Mismatch):
        authorize_session(_other_user(world, settings), impersonated=False)


def test_a_scope_check_runs_before_the_permission_check(world: World, settings: Any) -> None:
    _no_permission(world, settings)
    with pytest.raises(errors.ScopeRefused) as refused:
        authorize_session(_scope_check_says_unconfirmed(world, settings), impersonated=False)
    assert refused.value.code == "unconfirmed"


def test_forbidden_comes_before_not_found_for_another_users_chat(world: World, settings: Any) -> None:
    others = ConversationFactory()
    _assistant_off(world, settings)
    with pytest.raises(errors.Forbidden):
        conversations.get_conversation(world.ref, others.pk, impersonated=False)
