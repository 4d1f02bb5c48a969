"""A tool's title and preview labels: what a person reads on its card, validated at declaration."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import translation
from django.utils.translation import gettext_lazy

from agent.tools import registry


def noop(ctx: Any, **args: Any) -> dict[str, Any]:
    return {}


def test_a_lazy_title_and_labels_are_kept_lazy_and_read_in_the_active_language(declare):
    declare(noop, name="t_words", title=gettext_lazy("Cancel"), labels={"title": gettext_lazy("Title")})

    tool = registry.get("t_words")
    with translation.override("ru"):
        assert (tool.display_title(), str(tool.labels["title"])) == ("Отмена", "Название")
    with translation.override("en"):
        assert tool.display_title() == "Cancel"


def test_a_tool_without_a_title_is_shown_by_its_name(declare):
    declare(noop, name="t_plain")

    assert registry.get("t_plain").display_title() == "t_plain"


@pytest.mark.parametrize("title", ["", "   ", 42, ["Create"]])
def test_a_blank_or_non_text_title_is_refused(declare, title):
    with pytest.raises(ImproperlyConfigured, match="title"):
        declare(noop, name="t_title", title=title)

    assert registry.get("t_title") is None


@pytest.mark.parametrize("labels", [["title"], {"title": ""}, {"title": 3}, {4: "Four"}])
def test_labels_that_are_not_phrases_by_key_are_refused(declare, labels):
    with pytest.raises(ImproperlyConfigured, match="label"):
        declare(noop, name="t_labels", labels=labels)

    assert registry.get("t_labels") is None
