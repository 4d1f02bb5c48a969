"""What the page shows for cards, steps and notices: a tool's title, labelled fields, the outcome."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import translation
from django.utils.translation import gettext_lazy

from agent.notices import tone as notice_tone
from agent.step_labels import confirmation_fields
from agent.web.rendering import page_view


def noop(ctx: Any, **args: Any) -> dict[str, Any]:
    return {}


@pytest.fixture
def labelled(declare):
    declare(
        noop,
        name="t_card",
        kind="write",
        module="notes",
        preview=lambda ctx, **a: a,
        title=gettext_lazy("Cancel"),
        labels={"title": gettext_lazy("Title"), "body": "Body"},
    )


def confirmation_message(preview: Any, tool: str = "t_card") -> dict[str, Any]:
    return {"role": "tool", "tool_name": tool, "confirmation": {"id": "c1", "status": "waiting", "preview": preview}}


def test_a_card_shows_its_title_and_labelled_fields_in_the_user_language(labelled):
    with translation.override("ru"):
        view = page_view(confirmation_message({"title": "Купить молоко", "body": "две бутылки"}))

    assert view["tool_title"] == "Отмена"
    assert view["confirmation"]["fields"] == [
        {"key": "title", "label": "Название", "value": "Купить молоко"},
        {"key": "body", "label": "Body", "value": "две бутылки"},
    ]


def test_empty_fields_and_keys_without_a_label_are_left_out(labelled):
    fields = confirmation_fields("t_card", {"title": "Milk", "body": "  ", "action": "internal", "id": 7})

    assert fields == [{"key": "title", "label": "Title", "value": "Milk"}]


def test_a_tool_without_labels_shows_every_non_empty_key_as_it_is():
    fields = confirmation_fields("no_such_tool", {"a": "x", "b": "", "c": None, "d": [], "e": {"n": 1}, "f": 0})

    assert [(f["label"], f["value"]) for f in fields] == [("a", "x"), ("e", '{"n": 1}'), ("f", "0")]


def test_a_card_outcome_notice_names_the_tool_by_its_title(labelled):
    notice = {"role": "notice", "notice_code": "confirmation_done", "notice_params": {"tool": "t_card"}}

    with translation.override("en"):
        view = page_view(notice)

    assert view["notice_text"] == "Done: Cancel."
    assert view["notice_tone"] == "success"


@pytest.mark.parametrize(
    "code, tone",
    [
        ("confirmation_done", "success"),
        ("model_failed", "error"),
        ("confirmation_failed", "error"),
        ("confirmation_stale", "error"),
        ("deadline", "error"),
        ("stopped", "info"),
        ("confirmation_cancelled", "info"),
    ],
)
def test_success_and_error_notices_are_told_apart(code, tone):
    assert notice_tone(code) == tone


def test_a_step_carries_its_tool_title(labelled):
    view = page_view({"role": "tool", "tool_name": "t_card", "confirmation": None})

    assert view["tool_title"] == "Cancel" and view["confirmation"] is None


def test_a_search_for_tools_reads_as_such_in_the_users_language():
    with translation.override("ru"):
        view = page_view({"role": "tool", "tool_name": "find_tools", "confirmation": None})
    assert view["tool_title"] == "Поиск инструментов"
