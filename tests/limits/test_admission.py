"""A new turn's admission: the rolling 24-hour caps, the turn caps and the off-purpose block."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from agent.ai import AIError, complete
from agent.core.errors import Blocked, BudgetExceeded
from agent.limits.admission import admit, report_off_purpose
from agent.models import AgentSettings, AIRequest, OffPurposeFlag, Turn
from tests.support.factories import AIRequestFactory, ConversationFactory, TurnFactory, UserSettingsFactory


def agent(**overrides: Any) -> Any:
    return override_settings(AGENT={**settings.AGENT, **overrides})


def spend(user: Any, cost: float, *, hours_ago: float = 0) -> AIRequest:
    row = AIRequestFactory(user=user, cost_usd=cost)
    if hours_ago:
        AIRequest.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(hours=hours_ago))
    return row


def turn_of(user: Any, *, hours_ago: float = 0) -> Turn:
    turn = TurnFactory(
        conversation=ConversationFactory(user=user),
        user=user,
        language="en",
        text="t",
        status=Turn.Status.FINISHED,
        deadline_at=timezone.now(),
    )
    if hours_ago:
        Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(hours=hours_ago))
    return turn


def flag(user: Any, *, hours_ago: float = 0) -> None:
    turn_ref = uuid.uuid4()
    assert report_off_purpose(user, turn_ref, "weather talk")
    if hours_ago:
        OffPurposeFlag.objects.filter(turn_ref=turn_ref).update(created_at=timezone.now() - timedelta(hours=hours_ago))


def site(**fields: Any) -> None:
    AgentSettings.objects.filter(pk=AgentSettings.current().pk).update(**fields)


def test_admit_without_caps_gives_an_admission_id(user):
    spend(user, 1000)

    assert admit(user, "agent.chat")


def test_user_cost_cap_reached_is_budget_exceeded(user):
    spend(user, 0.6)
    spend(user, 0.4)

    with agent(DAILY_COST_PER_USER=1), pytest.raises(BudgetExceeded) as raised:
        admit(user, "agent.chat")

    assert raised.value.params == {"limit": "cost_per_user"}


def test_user_cost_below_the_cap_is_admitted(user):
    spend(user, 0.99)

    with agent(DAILY_COST_PER_USER=1):
        assert admit(user, "agent.chat")


def test_another_users_cost_does_not_count_against_the_user_cap(user, make_user):
    spend(make_user(), 5)

    with agent(DAILY_COST_PER_USER=1):
        assert admit(user, "agent.chat")


def test_site_cost_cap_counts_every_user(user, make_user):
    spend(make_user(), 0.7)
    spend(user, 0.3)

    with agent(DAILY_COST_SITE=1), pytest.raises(BudgetExceeded) as raised:
        admit(user, "agent.chat")

    assert raised.value.params == {"limit": "cost_site"}


def test_turns_per_user_cap(user):
    turn_of(user)
    turn_of(user)

    with agent(DAILY_TURNS_PER_USER=2), pytest.raises(BudgetExceeded) as raised:
        admit(user, "agent.chat")

    assert raised.value.params == {"limit": "turns_per_user"}


def test_turns_older_than_a_day_do_not_count(user):
    turn_of(user)
    turn_of(user, hours_ago=25)

    with agent(DAILY_TURNS_PER_USER=2):
        assert admit(user, "agent.chat")


def test_cost_older_than_a_day_does_not_count(user):
    spend(user, 5, hours_ago=24.1)
    spend(user, 0.5, hours_ago=23.9)

    with agent(DAILY_COST_PER_USER=1, DAILY_COST_SITE=1):
        assert admit(user, "agent.chat")


def test_site_settings_override_the_setting(user):
    spend(user, 2)
    site(daily_cost_per_user=5)

    with agent(DAILY_COST_PER_USER=1):
        assert admit(user, "agent.chat")


def test_site_settings_zero_means_no_cap(user):
    spend(user, 2)
    site(daily_cost_per_user=0, daily_turns_per_user=0, daily_cost_site=0)
    turn_of(user)

    with agent(DAILY_COST_PER_USER=1, DAILY_TURNS_PER_USER=1, DAILY_COST_SITE=1):
        assert admit(user, "agent.chat")


def test_user_settings_override_site_settings(user):
    spend(user, 2)
    site(daily_cost_per_user=5, daily_turns_per_user=5)
    UserSettingsFactory(user=user, daily_cost_cap=1)

    with pytest.raises(BudgetExceeded) as raised:
        admit(user, "agent.chat")

    assert raised.value.params == {"limit": "cost_per_user"}


def test_user_turns_override_site_settings(user):
    turn_of(user)
    site(daily_turns_per_user=5)
    UserSettingsFactory(user=user, daily_turns_cap=1)

    with pytest.raises(BudgetExceeded) as raised:
        admit(user, "agent.chat")

    assert raised.value.params == {"limit": "turns_per_user"}


def test_user_settings_may_lift_the_cap_for_one_user(user):
    spend(user, 2)
    site(daily_cost_per_user=1)
    UserSettingsFactory(user=user, daily_cost_cap=10)

    assert admit(user, "agent.chat")


def test_report_off_purpose_flags_a_turn_once(user):
    turn_ref = uuid.uuid4()

    assert report_off_purpose(user, turn_ref, "asked for a poem") is True
    assert report_off_purpose(user, turn_ref, "asked again") is False

    assert list(OffPurposeFlag.objects.values_list("turn_ref", "reason")) == [(turn_ref, "asked for a poem")]


def test_limit_of_flags_in_a_day_blocks_new_turns(user):
    for _ in range(3):
        flag(user)

    with pytest.raises(Blocked):
        admit(user, "agent.chat")


def test_one_flag_under_the_limit_admits(user):
    for _ in range(2):
        flag(user)

    assert admit(user, "agent.chat")


def test_flags_older_than_a_day_do_not_block(user):
    flag(user)
    flag(user)
    flag(user, hours_ago=25)

    assert admit(user, "agent.chat")


def test_off_purpose_limit_is_a_setting(user):
    flag(user)

    with agent(OFF_PURPOSE_LIMIT=1), pytest.raises(Blocked):
        admit(user, "agent.chat")


def test_another_users_flags_do_not_block(user, make_user):
    other = make_user()
    for _ in range(3):
        flag(other)

    assert admit(user, "agent.chat")


def test_complete_with_an_admission_rechecks_the_caps_before_calling(endpoint, model_server, user):
    with agent(DAILY_COST_PER_USER=1):
        admission = admit(user, "agent.chat")
        spend(user, 1)

        with pytest.raises(AIError) as raised:
            complete(
                endpoint,
                [{"role": "user", "content": "hi"}],
                user=user,
                source="agent",
                task="agent.chat",
                admission=admission,
            )

    assert (raised.value.code, raised.value.params()) == (
        "budget_exceeded",
        {"code": "budget_exceeded", "limit": "cost_per_user"},
    )
    assert model_server.requests == []
    assert AIRequest.objects.filter(status=AIRequest.Status.REFUSED, admission=admission).count() == 1


def test_complete_with_an_admission_under_the_caps_calls_the_model(endpoint, model_server, user):
    with agent(DAILY_COST_PER_USER=1):
        admission = admit(user, "agent.chat")
        complete(
            endpoint,
            [{"role": "user", "content": "hi"}],
            user=user,
            source="agent",
            task="agent.chat",
            admission=admission,
        )

    assert len(model_server.requests) == 1
