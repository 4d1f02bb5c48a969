"""``agent.tools.rank``: the user's visible tools that fit a text, best first; a site's own ranker."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from agent.access import Scope
from agent.tools import agent_tool, rank, visible_for
from agent.tools.ranking import indexes, stems
from tests.support.catalogue import declare_catalogue
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db


@pytest.fixture
def hundred(declare: Any) -> list[str]:
    return declare_catalogue(declare)


@pytest.mark.parametrize(
    ("text", "best"),
    [
        ("How many feedings did she have today?", "feeding_list"),
        ("delete the last temperature reading", "temperature_destroy"),
        ("add a tummy time session", "tummy_time_create"),
        ("change the height we recorded", "height_update"),
        ("Number of results to return per page", "bath_list"),  # a parameter's description, ties by name
    ],
)
def test_the_best_tool_comes_first(scope: Scope, hundred: list[str], text: str, best: str) -> None:
    assert rank(scope, text, limit=5)[0] == best


def test_a_russian_user_is_ranked_by_translated_titles_and_english_words(scope: Scope, hundred: list[str]) -> None:
    russian = dataclasses.replace(scope, language="ru")
    assert rank(russian, "Удали последнее кормление", limit=3)[0] == "feeding_destroy"
    assert rank(russian, "покажи заметки", limit=3)[0] in ("note_list", "note_retrieve")
    assert rank(russian, "vaccine", limit=5)[0].startswith("vaccine_")  # English words still count


@pytest.mark.parametrize(
    ("text", "best"),
    [
        ("Исправь последнее кормление: это была смесь", "feeding_update"),  # "была" asks for no list
        ("Сохрани это как заметку", "note_create"),  # "как" is "as" here, not "how"
    ],
)
def test_russian_small_words_do_not_pull_lists(scope: Scope, hundred: list[str], text: str, best: str) -> None:
    assert rank(dataclasses.replace(scope, language="ru"), text, limit=1) == [best]


def test_stems_meet_across_forms_and_actions_across_languages() -> None:
    assert stems("feedings", "en") == stems("feeding", "en")
    assert stems("кормления", "ru")[0] == stems("кормление", "ru")[0] == stems("кормлений", "ru")[0]
    assert (
        "~create" in stems("добавь", "ru") and "~create" in stems("create", "en") and "~create" in stems("lisa", "et")
    )
    assert stems("toitmised", "et")[0] == stems("toitmine", "et")[0]


def test_only_tools_the_user_may_use_are_ranked(scope: Scope, declare: Any) -> None:
    declare(lambda ctx: {}, name="payroll_export", permission="agent.manage_agent", description="Export the payroll.")
    declare(lambda ctx: {}, name="payroll_view", description="Show the payroll.")
    assert rank(scope, "payroll", limit=5) == ["payroll_view"]


def test_a_text_with_no_word_of_any_tool_ranks_none(scope: Scope, hundred: list[str]) -> None:
    assert rank(scope, "hello there", limit=5) == []


def test_ranking_is_deterministic_and_limited(scope: Scope, hundred: list[str]) -> None:
    first = rank(scope, "show the child's records", limit=7)
    assert len(first) == 7 and all(rank(scope, "show the child's records", limit=7) == first for _ in range(3))


def test_the_index_of_a_set_of_tools_is_built_once(scope: Scope, hundred: list[str]) -> None:
    tools = visible_for(scope)
    assert indexes.get(tools, "en") is indexes.get(list(tools), "en")
    assert indexes.get(tools, "en") is not indexes.get(tools, "ru")


def test_ranking_a_thousand_tools_takes_under_5_ms(scope: Scope, declare: Any) -> None:
    for n in range(1000):
        declare(lambda ctx: {}, name=f"tool_{n}", description=f"Record number {n} of kind {n % 37} in batch {n % 11}.")
    rank(scope, "warm the index", limit=20)
    took = []
    for _ in range(31):
        started = time.perf_counter()
        rank(scope, "show record kind 7 in batch 3 and the latest feeding", limit=20)
        took.append(time.perf_counter() - started)
    assert sorted(took)[15] < 0.005  # the median: a busy machine's pauses are not the ranker's


def site_ranker(scope: Scope, text: str, *, limit: int) -> list[str]:
    """A site's own ranker: a name the user may not use, a repeat and a stranger are dropped."""
    return ["payroll_export", "notes_read", "notes_read", "nothing_such", "notes_search", "notes_wait"]


def test_a_sites_own_ranker_is_used_within_the_users_tools(scope: Scope, declare: Any) -> None:
    declare(lambda ctx: {}, name="payroll_export", permission="agent.manage_agent")
    with agent_conf(TOOL_RANKER="tests.tools.test_ranking.site_ranker"):
        assert rank(scope, "anything", limit=2) == ["notes_read", "notes_search"]


def failing_ranker(scope: Scope, text: str, *, limit: int) -> list[str]:
    raise ConnectionError("the embeddings service is down")


def test_a_sites_ranker_that_fails_leaves_the_ranking_to_the_words(
    scope: Scope, hundred: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with agent_conf(TOOL_RANKER="tests.tools.test_ranking.failing_ranker"):
        assert rank(scope, "delete the last temperature reading", limit=1) == ["temperature_destroy"]
    assert "TOOL_RANKER" in caplog.text and "ConnectionError" in caplog.text


@pytest.mark.parametrize("value", ["tests.tools.test_ranking.no_such_ranker", "tests.tools.test_ranking.NAMES", 7])
def test_a_tool_ranker_that_is_no_function_fails_the_checks(value: Any) -> None:
    with agent_conf(TOOL_RANKER=value), pytest.raises(SystemCheckError, match="agent.E006"):
        call_command("check")


NAMES = ["not", "callable"]


def test_no_site_tool_takes_the_name_find_tools() -> None:
    with pytest.raises(ImproperlyConfigured, match="find_tools"):
        agent_tool(name="find_tools", description="Mine.")(lambda ctx: {})
