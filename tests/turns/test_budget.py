"""The cost caps before each model call of a turn, read in the turn's one check.

The turn reads the caps and what was spent with its re-check of the session,
so each cap must come out as admission picks it: the user's own, else the
site's, else the setting; 0 means no cap.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone, translation

from agent import turns
from agent.conversations import client_view
from agent.models import AgentSettings, Message, UserSettings
from agent.tasks import run_turn
from agent.web.rendering import page_view
from tests.support.model_server import answer, tool_calls
from tests.support.turns import agent_conf, messages_of

pytestmark = pytest.mark.django_db(transaction=True)

COSTLY = {"prompt_tokens": 10**6, "completion_tokens": 0, "total_tokens": 10**6}  # $2 at the endpoint's price


def _run(ref: Any, chat: Any, model_server: Any) -> list[Message]:
    model_server.push(tool_calls(("notes_search", {"query": "x"})) | {"usage": COSTLY}, answer("the answer"))
    turn = turns.start(ref, chat.pk, "search", impersonated=False)
    run_turn(str(turn.pk))
    return messages_of(chat)


def _refused_for(messages: list[Message]) -> str | None:
    last = messages[-1]
    if last.notice_code == "model_failed" and last.notice_params.get("code") == "budget_exceeded":
        return last.notice_params.get("limit")
    return None


@pytest.mark.parametrize(
    "site, own, limit",
    [
        ({"daily_cost_per_user": Decimal("1")}, {}, "cost_per_user"),
        ({"daily_cost_site": Decimal("1")}, {}, "cost_site"),
        ({}, {"daily_cost_cap": Decimal("1")}, "cost_per_user"),
        ({"daily_cost_per_user": Decimal("1")}, {"daily_cost_cap": Decimal("0")}, None),
        ({"daily_cost_per_user": Decimal("5"), "daily_cost_site": Decimal("5")}, {}, None),
    ],
    ids=["site per-user cap", "site cap", "own cap", "own 0 lifts the site's", "under the caps"],
)
def test_a_cap_reached_by_the_first_call_refuses_the_second(
    ref: Any, chat: Any, user: Any, endpoint: Any, model_server: Any, site: dict, own: dict, limit: str | None
) -> None:
    AgentSettings.objects.filter(pk=AgentSettings.current().pk).update(**site)
    if own:
        UserSettings.objects.update_or_create(user=user, defaults=own)
    messages = _run(ref, chat, model_server)
    assert _refused_for(messages) == limit
    assert len(model_server.requests) == (1 if limit else 2)
    if limit is None:
        assert messages[-1].content == "the answer"


def test_a_cap_reached_mid_turn_says_how_much_of_it_is_used_and_when_it_frees_up(
    ref: Any, chat: Any, user: Any, endpoint: Any, model_server: Any
) -> None:
    AgentSettings.objects.filter(pk=AgentSettings.current().pk).update(daily_cost_per_user=Decimal("1"))
    notice = _run(ref, chat, model_server)[-1]
    assert notice.notice_params | {"frees_at": None} == {
        "code": "budget_exceeded",
        "limit": "cost_per_user",
        "cap": "1.0000",
        "used": "2.00000000",
        "frees_at": None,
    }
    frees_at = datetime.fromisoformat(notice.notice_params["frees_at"])
    assert timedelta(hours=23) < frees_at - timezone.now() <= timedelta(hours=24)
    with translation.override("en"):
        text = page_view(client_view(notice))["notice_text"]
    assert text.startswith("You have used $2 of your $1 for 24 hours. It frees up at ")


def test_the_settings_caps_count_when_nothing_overrides_them(
    ref: Any, chat: Any, endpoint: Any, model_server: Any
) -> None:
    with agent_conf(DAILY_COST_SITE=1):
        messages = _run(ref, chat, model_server)
    assert _refused_for(messages) == "cost_site"
