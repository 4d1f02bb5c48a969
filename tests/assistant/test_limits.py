"""Limits that explain themselves: a refusal names the limit, the amount and when it frees up."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from agent import turns
from agent.access import SessionRef
from agent.conversations import create_conversation
from agent.core.errors import Blocked, BudgetExceeded, TooManyTurns
from agent.models import AIRequest, Conversation, OffPurposeFlag, Turn
from tests.support.factories import AIRequestFactory, TurnFactory, UserSettingsFactory
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db


def spend(user: Any, *costs: str) -> list[AIRequest]:
    rows = []
    for cost in costs:
        rows.append(AIRequestFactory(user=user, cost_usd=Decimal(cost)))
    return rows


def earlier_turn(chat: Conversation, user: Any, **fields: Any) -> Turn:
    fields.setdefault("status", "finished")
    return TurnFactory(
        conversation=chat,
        user=user,
        language="en",
        text="t",
        deadline_at=timezone.now() + timedelta(minutes=3),
        **fields,
    )


def test_the_cost_cap_says_how_much_and_when_enough_of_the_window_passes(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any
) -> None:
    UserSettingsFactory(user=user, daily_cost_cap=Decimal("1.5"))
    rows = spend(user, "0.2", "0.2", "1.5")  # 1.9 spent: only when the third leaves is it under 1.5
    with pytest.raises(BudgetExceeded) as refused:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    params = refused.value.params
    assert (params["limit"], Decimal(params["cap"]), Decimal(params["used"])) == ("cost_per_user", 1.5, Decimal("1.9"))
    assert params["frees_at"] == (rows[2].created_at + timedelta(hours=24)).isoformat()
    assert "$1.90 of your $1.50 for 24 hours" in params["message"]


def test_the_turns_cap_says_when_the_next_turn_frees_up(ref: SessionRef, user: Any, chat: Any, endpoint: Any) -> None:
    UserSettingsFactory(user=user, daily_turns_cap=2)
    first, _second = earlier_turn(chat, user), earlier_turn(chat, user)
    with pytest.raises(BudgetExceeded) as refused:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    params = refused.value.params
    assert (params["limit"], params["cap"], params["used"]) == ("turns_per_user", "2", "2")
    assert params["frees_at"] == (first.created_at + timedelta(hours=24)).isoformat()
    assert "2 of your 2 turns" in params["message"]


def test_the_off_purpose_block_says_when_it_lifts(ref: SessionRef, user: Any, chat: Any, endpoint: Any) -> None:
    flags = [
        OffPurposeFlag.objects.create(user=user, turn_ref=f"00000000-0000-0000-0000-00000000000{n}", reason="r")
        for n in range(3)
    ]
    with pytest.raises(Blocked) as refused:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    params = refused.value.params
    assert (params["limit"], params["cap"], params["used"]) == ("off_purpose", "3", "3")
    assert params["frees_at"] == (flags[0].created_at + timedelta(hours=24)).isoformat()


def test_too_many_turns_at_once_says_how_many(ref: SessionRef, user: Any, chat: Any, endpoint: Any) -> None:
    with agent_conf(MAX_TURNS_PER_USER=1):
        turns.start(ref, chat.pk, "first", impersonated=False)
        second = create_conversation(ref, {}, impersonated=False)
        with pytest.raises(TooManyTurns) as refused:
            turns.start(ref, second.pk, "second", impersonated=False)
    params = refused.value.params
    assert (params["limit"], params["cap"], params["used"]) == ("turns_at_once", "1", "1")
    assert "Wait for one to finish" in params["message"]


@pytest.mark.parametrize("language", ["en", "ru", "et"])
def test_the_api_tells_the_limit_in_the_users_language(
    session: Any, user: Any, chat: Any, endpoint: Any, language: str
) -> None:
    from django.utils import formats, translation

    client, _ref = session
    UserSettingsFactory(user=user, daily_turns_cap=1, language=language)
    first = earlier_turn(chat, user)
    response = client.post(
        reverse("agent:turn_start", args=[chat.pk]), json.dumps({"text": "hello"}), content_type="application/json"
    )
    body = response.json()
    assert (response.status_code, body["error"]) == (429, "budget_exceeded")
    assert body["limit"] == {
        "limit": "turns_per_user",
        "cap": "1",
        "used": "1",
        "frees_at": (first.created_at + timedelta(hours=24)).isoformat(),
    }
    with translation.override(language):  # the date as the user's language writes it
        frees = timezone.localtime(first.created_at + timedelta(hours=24))
        when = f"{formats.date_format(frees, 'SHORT_DATE_FORMAT')} {frees:%H:%M}"
    assert when in body["message"] and ".." not in body["message"]
    assert ("of your 1 turns" in body["message"]) == (language == "en")  # the words too, from the catalogues
    if language == "ru":
        assert any("а" <= letter <= "я" for letter in body["message"])  # the words in Russian
    assert "api_key" not in json.dumps(body)
