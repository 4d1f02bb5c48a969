"""Which endpoint a turn uses and why: personal, default, or a fallback with its reason."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agent import notices, turns
from agent.access import SessionRef
from agent.ai import effective, effective_endpoint
from agent.ai.endpoints import chosen
from agent.models import AgentSettings, Endpoint, Message, Turn, UserSettings
from agent.tasks import run_turn
from tests.support.factories import EndpointFactory
from tests.support.model_server import ScriptedModelServer, answer

pytestmark = pytest.mark.django_db
STAFF, USER = UserSettings.SetBy.STAFF, UserSettings.SetBy.USER


def other(name: str, base_url: str = "http://127.0.0.1:9/v1", **fields: Any) -> Endpoint:
    return EndpointFactory(name=name, base_url=base_url, model=f"{name}-model", **fields)


def allow(*endpoints: Endpoint) -> None:
    AgentSettings.current().selectable_endpoints.set(endpoints)


def own(user: Any, **fields: Any) -> UserSettings:
    row, _created = UserSettings.objects.update_or_create(user=user, defaults=fields)
    return row


def test_without_a_personal_endpoint_the_site_default_answers(user: Any, endpoint: Endpoint) -> None:
    choice = effective(user)
    assert (choice.endpoint, choice.source, choice.reason) == (endpoint, "default", "")
    assert effective_endpoint(user) == endpoint


def test_a_caller_that_read_no_settings_row_costs_one_read_of_the_site_settings_with_their_endpoints(
    user: Any, endpoint: Endpoint, django_assert_num_queries: Any
) -> None:
    AgentSettings.current()  # the row exists, as on any site that has served a turn
    with django_assert_num_queries(1):
        choice = effective(user, user_settings=None)  # the scope's check found no row of the user's
    assert (choice.endpoint, choice.source) == (endpoint, "default")


def test_staff_may_set_any_endpoint_even_one_off_the_allow_list(user: Any, endpoint: Endpoint) -> None:
    mine = other("staff pick")
    own(user, endpoint=mine, endpoint_set_by=STAFF)
    choice = effective(user)
    assert (choice.endpoint, choice.source, choice.reason) == (mine, "personal", "")
    assert effective_endpoint(user) == mine


def test_a_users_pick_is_used_while_it_is_on_the_allow_list(user: Any, endpoint: Endpoint) -> None:
    mine = other("picked")
    allow(mine)
    own(user, endpoint=mine, endpoint_set_by=USER)
    assert (effective(user).endpoint, effective(user).source) == (mine, "personal")


def test_a_users_pick_taken_off_the_allow_list_falls_back_as_not_allowed(user: Any, endpoint: Endpoint) -> None:
    mine, kept = other("picked"), other("kept")
    own(user, endpoint=mine, endpoint_set_by=USER)
    allow(kept)
    choice = effective(user)
    assert (choice.endpoint, choice.source, choice.reason) == (endpoint, "fallback", "not_allowed")
    assert effective_endpoint(user) == endpoint


def test_a_disabled_personal_endpoint_falls_back_as_disabled(user: Any, endpoint: Endpoint) -> None:
    mine = other("off", enabled=False)
    own(user, endpoint=mine, endpoint_set_by=STAFF)
    choice = effective(user)
    assert (choice.endpoint, choice.source, choice.reason) == (endpoint, "fallback", "disabled")


def test_a_deleted_personal_endpoint_falls_back_as_gone(user: Any, endpoint: Endpoint) -> None:
    mine = other("deleted")
    allow(mine)
    own(user, endpoint=mine, endpoint_set_by=USER)
    mine.delete()
    choice = effective(user)
    assert (choice.endpoint, choice.source, choice.reason) == (endpoint, "fallback", "gone")


def test_the_picture_endpoint_is_the_users_then_the_sites_then_the_chat_endpoint(user: Any, endpoint: Endpoint) -> None:
    # given no picture endpoint anywhere, pictures go where the chat goes
    assert effective(user, pictures=True) == effective(user)
    site = other("site pictures", supports_images=True)
    AgentSettings.objects.filter(pk=AgentSettings.current().pk).update(picture_endpoint=site)
    assert (effective(user, pictures=True).endpoint, effective(user, pictures=True).source) == (site, "default")
    assert effective(user).endpoint == endpoint  # a turn without pictures is not moved
    mine = other("own pictures", supports_images=True)
    own(user, picture_endpoint=mine, picture_endpoint_set_by=STAFF)
    assert (effective(user, pictures=True).endpoint, effective(user, pictures=True).source) == (mine, "personal")
    Endpoint.objects.filter(pk=mine.pk).update(enabled=False)
    choice = effective(user, pictures=True)
    assert (choice.endpoint, choice.source, choice.reason) == (site, "fallback", "disabled")
    Endpoint.objects.filter(pk=site.pk).update(enabled=False)
    assert effective(user, pictures=True).endpoint == endpoint
    assert chosen(user)["pictures"].endpoint == endpoint


def test_a_users_picture_pick_off_the_allow_list_falls_back(user: Any, endpoint: Endpoint) -> None:
    mine = other("own pictures", supports_images=True)
    own(user, picture_endpoint=mine, picture_endpoint_set_by=USER)
    choice = effective(user, pictures=True)
    assert (choice.endpoint, choice.source, choice.reason) == (endpoint, "fallback", "not_allowed")


def test_the_turn_records_its_endpoint_and_why(ref: SessionRef, chat: Any, user: Any, endpoint: Endpoint) -> None:
    own(user, endpoint=other("off", enabled=False), endpoint_set_by=STAFF)
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    assert (turn.endpoint, turn.endpoint_source, turn.endpoint_reason) == (endpoint, "fallback", "disabled")


def fallback_notices(user: Any) -> list[Message]:
    return list(Message.objects.filter(conversation__user=user, notice_code="endpoint_fallback").order_by("seq"))


def run(ref: SessionRef, chat: Any) -> Turn:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    run_turn(str(turn.pk))
    return turn


def test_a_fallback_is_told_once_in_the_chat_after_the_message_and_again_after_it_was_mended(
    ref: SessionRef, chat: Any, user: Any, endpoint: Endpoint, model_server: ScriptedModelServer
) -> None:
    mine = other("picked", base_url=model_server.base_url)
    allow(mine)
    own(user, endpoint=mine, endpoint_set_by=USER)
    model_server.push(*[answer("ok")] * 5)
    run(ref, chat)
    assert fallback_notices(user) == []
    # when staff take the pick off the allow-list, the next turn tells, the one after does not
    allow()
    run(ref, chat)
    run(ref, chat)
    told = fallback_notices(user)
    assert [m.notice_params for m in told] == [{"reason": "not_allowed"}]
    roles = [(m.role, m.notice_code) for m in Message.objects.filter(conversation=chat).order_by("seq")]
    assert roles[2:5] == [("user", ""), ("notice", "endpoint_fallback"), ("assistant", "")]
    # when the pick is allowed again and then taken off again, it is told again
    allow(mine)
    run(ref, chat)
    allow()
    run(ref, chat)
    assert len(fallback_notices(user)) == 2


def test_the_fallback_notice_names_its_reason() -> None:
    assert "switched off" in notices.text("endpoint_fallback", {"reason": "disabled"})
    assert "no longer be picked" in notices.text("endpoint_fallback", {"reason": "not_allowed"})
    assert "removed" in notices.text("endpoint_fallback", {"reason": "gone"})


def test_an_endpoint_chosen_by_staff_in_the_admin_is_staffs(make_user: Any, user: Any, endpoint: Endpoint) -> None:
    staff = make_user("agent.manage_agent", "agent.manage_endpoints", is_staff=True)
    client = Client()
    client.force_login(staff)
    mine = other("staff pick")
    response = client.post(
        reverse("admin:agent_usersettings_add"),
        {
            "user": user.pk,
            "endpoint": mine.pk,
            "instructions": "",
            "language": "",
            "enabled": "unknown",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    row = UserSettings.objects.get(user=user)
    assert (row.endpoint, row.endpoint_set_by, row.picture_endpoint_set_by) == (mine, "staff", "")
    assert effective(user).source == "personal"
