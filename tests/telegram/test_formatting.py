"""The assistant's Markdown as Telegram messages: only Telegram's HTML, the model's own HTML as text,
only http(s) links, and answers longer than Telegram takes cut into several, none lost."""

from __future__ import annotations

import html
import re
import sys
from typing import Any

import pytest
from django.core.checks import run_checks

from agent.telegram.formatting import card_text, length, messages, notice_text

ALLOWED_TAGS = {"b", "i", "s", "u", "code", "pre", "a", "blockquote"}


def tags(text: str) -> set[str]:
    return {name.lower() for name in re.findall(r"</?([a-zA-Z]+)", text)}


def test_markdown_becomes_telegrams_html_and_nothing_else() -> None:
    source = (
        "# Plan\n\n**Buy** _milk_ and ~~beer~~ `now`\n\n- one\n- two\n  1. a\n\n> quoted\n\n"
        "```python\nif a < b: pass\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    )
    (message,) = messages(source)
    assert tags(message) <= ALLOWED_TAGS
    assert "<b>Plan</b>" in message and "<b>Buy</b> <i>milk</i> and <s>beer</s> <code>now</code>" in message
    assert "• one\n• two\n  1. a" in message and "<blockquote>quoted</blockquote>" in message
    assert '<pre><code class="language-python">if a &lt; b: pass</code></pre>' in message
    assert "a | b\n1 | 2" in message


def test_the_models_own_html_is_shown_as_text() -> None:
    (message,) = messages('Hi <script>alert(1)</script> <b onclick="x">bold</b> & more')
    assert "<script>" not in message and "&lt;script&gt;" in message and "&amp; more" in message
    assert tags(message) == set()


def test_only_http_links_are_links() -> None:
    (message,) = messages("[site](https://example.com/?a=1&b=2) [bad](javascript:alert(1)) [mail](mailto:a@b.c)")
    assert '<a href="https://example.com/?a=1&amp;b=2">site</a>' in message
    assert 'href="javascript' not in message and 'href="mailto' not in message
    assert message.count("<a ") == 1


@pytest.mark.parametrize("word", ["word ", "слово ", "🙂 "])
def test_a_long_answer_is_cut_into_messages_telegram_takes_and_loses_nothing(word: str) -> None:
    source = word * 3000
    pieces = messages(source)
    assert len(pieces) > 1 and all(length(piece) <= 4096 for piece in pieces)
    assert " ".join(html.unescape(p) for p in pieces).split() == source.split()


def test_blocks_that_fit_together_share_a_message() -> None:
    assert messages("one\n\ntwo\n\nthree") == ["one\n\ntwo\n\nthree"]
    assert messages("") == [] and messages("   \n\n ") == []


def test_a_card_shows_its_title_fields_and_outcome() -> None:
    text = card_text("notes_create", {"title": "Buy <milk>", "body": ""})
    assert text == "<b>Create a note</b>\nTitle: Buy &lt;milk&gt;"
    decided = card_text("notes_create", {"title": "Buy milk"}, "done")
    assert decided.endswith("<i>Done: Create a note.</i>")
    update = card_text("x", {"fields": [{"name": "title", "label": "Title", "value": "new", "old": "old"}]})
    assert "Title: <s>old</s> → new" in update


def test_a_notice_reads_as_on_the_page() -> None:
    assert notice_text("stopped", {}) == "<i>Stopped.</i>"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"TOKEN": "t", "BOT_USERNAME": "b", "MODE": "polling"}, None),
        ({"TOKEN": "t", "BOT_USERNAME": "b"}, "needs SECRET"),
        ({"TOKEN": "t", "BOT_USERNAME": "b", "MODE": "webhook", "SECRET": "bad secret!"}, "needs SECRET"),
        ({"BOT_USERNAME": "b", "MODE": "polling"}, "needs TOKEN"),
        ({"TOKEN": "t", "MODE": "polling"}, "needs BOT_USERNAME"),
        ({"TOKEN": "t", "BOT_USERNAME": "b", "MODE": "push"}, "must be 'webhook' or 'polling'"),
        ({"TOKEN": "t", "BOT_USERNAME": "b", "MODE": "polling", "TOKN": "x"}, "unknown keys: TOKN"),
        ("token", "must be None or a dict"),
    ],
)
def test_the_telegram_setting_is_checked_at_start(settings: Any, value: Any, problem: str | None) -> None:
    settings.AGENT = {**settings.AGENT, "TELEGRAM": value}
    found = [m.msg for m in run_checks(tags=["agent"]) if m.id == "agent.E019"]
    assert (found == []) if problem is None else any(problem in m for m in found), found


def test_a_bot_without_its_library_is_named_at_start(settings: Any, monkeypatch: Any) -> None:
    settings.AGENT = {**settings.AGENT, "TELEGRAM": {"TOKEN": "t", "BOT_USERNAME": "b", "MODE": "polling"}}
    assert not [m for m in run_checks(tags=["agent"]) if m.id == "agent.E020"]
    monkeypatch.setitem(sys.modules, "telegram", None)  # as if python-telegram-bot were not installed
    assert [m.hint for m in run_checks(tags=["agent"]) if m.id == "agent.E020"] == [
        'pip install "django-agent[telegram]"'
    ]
