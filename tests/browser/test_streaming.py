"""Answers stream into the page: a draft formatted as answers are while the model writes, then the stored
answer; a stop keeps the words shown as a partial answer."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from agent.conversations import append_message
from agent.models import Message, Turn
from tests.support.browser import send, sign_in
from tests.support.factories import ConversationFactory
from tests.support.model_server import answer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORDS = [f"word{n:02}" for n in range(1, 21)]
SLOW_ANSWER = "Here **bold** " + " ".join(WORDS)
"""Twenty-two chunks 0.15 s apart: about three seconds in which the draft is all there is."""
SHOWN_ANSWER = "Here bold " + " ".join(WORDS)
"""What the page shows of it, draft or stored: the Markdown rendered."""


def stored_answers() -> bool:
    return Message.objects.filter(role="assistant").exists()


def draft_bubble(page: Page) -> Locator:
    return page.locator("#draft .msg-draft .bubble")


def see_a_partial_draft(page: Page) -> str:
    """Wait until the draft shows the answer's start, and return what it shows then."""
    draft = draft_bubble(page)
    expect(draft).to_have_text(re.compile(r"^Here bold word01"))
    expect(draft.locator("strong")).to_have_text("bold")
    return (draft.text_content() or "").strip()


def assert_answered_once(page: Page) -> None:
    """The draft gave way to one rendered answer holding the whole text."""
    expect(page.locator("#draft")).to_be_hidden()
    expect(page.locator("#draft .msg-draft")).to_have_count(0)
    answers = page.locator("#message-log .msg-assistant .bubble.markdown")
    expect(answers).to_have_count(1)
    expect(answers.locator("strong")).to_have_text("bold")
    expect(answers).to_have_text(SHOWN_ANSWER)
    assert (page.locator("#messages").text_content() or "").count("word20") == 1


def test_the_draft_grows_before_the_answer_is_stored_and_the_answer_replaces_it(tab, user, endpoint, model_server):
    model_server.push(answer(SLOW_ANSWER, chunk_delay=0.15))
    sign_in(tab, user)
    send(tab, "write slowly")

    shown = see_a_partial_draft(tab)
    assert not stored_answers()
    assert SHOWN_ANSWER.startswith(shown) and len(shown) < len(SHOWN_ANSWER)
    expect(draft_bubble(tab)).not_to_have_text(shown)  # it keeps growing
    grown = (draft_bubble(tab).text_content() or "").strip()
    assert SHOWN_ANSWER.startswith(grown) and len(grown) > len(shown)

    assert_answered_once(tab)
    assert Message.objects.filter(role="assistant").count() == 1
    expect(tab.locator("#composer-text")).to_be_enabled()


def test_every_tab_of_the_chat_sees_the_draft_and_then_the_one_answer(
    browser_context, tab, user, endpoint, model_server
):
    chat = ConversationFactory(user=user, title="Shared chat")
    append_message(chat.pk, role=Message.Role.USER, content="earlier")
    sign_in(tab, user, path=f"/assistant/c/{chat.pk}/")
    other = browser_context.new_page()
    other.goto(tab.url)
    for page in (tab, other):
        expect(page.locator(".msg-user .bubble")).to_have_text(["earlier"])
        expect(page.locator("#connection")).to_be_hidden()

    model_server.push(answer(SLOW_ANSWER, chunk_delay=0.15))
    send(tab, "write slowly")
    for page in (tab, other):
        see_a_partial_draft(page)
    assert not stored_answers()

    for page in (tab, other):
        assert_answered_once(page)
    assert Message.objects.filter(role="assistant").count() == 1


def test_stop_mid_stream_keeps_the_words_shown_marked_stopped_and_they_survive_a_reload(
    tab, user, endpoint, model_server
):
    model_server.push(answer(SLOW_ANSWER, chunk_delay=0.15))
    sign_in(tab, user)
    send(tab, "write slowly")
    shown = see_a_partial_draft(tab)

    tab.locator("#stop").click()

    expect(tab.locator('[data-notice-code="stopped"] .notice-text')).to_have_text("Stopped.")
    expect(tab.locator("#composer-text")).to_be_enabled(timeout=5_000)
    expect(tab.locator("#stop")).to_be_hidden()
    assert Turn.objects.get().status == Turn.Status.STOPPED
    kept = Message.objects.get(role="assistant")
    # the draft shows the Markdown formatted, so the words shown are the stored text without its marks
    assert kept.partial and kept.content.replace("**", "").startswith(shown) and len(kept.content) < len(SLOW_ANSWER)
    for moment in ("as it stopped", "after a reload"):
        if moment == "after a reload":
            tab.reload()
        # the words shown, rendered as an answer with its mark, then the stopped notice
        expect(tab.locator("#draft")).to_be_hidden()
        partial = tab.locator("#message-log .msg-assistant.msg-partial")
        expect(partial).to_have_count(1)
        expect(partial.locator(".bubble.markdown")).to_have_text(kept.content.replace("**", ""))
        expect(partial.locator(".bubble.markdown strong")).to_have_text("bold")
        expect(partial.locator(".msg-partial-mark")).to_have_text("Stopped")
        expect(tab.locator('[data-notice-code="stopped"]')).to_be_visible()
        kinds = tab.locator("#message-log > .msg").evaluate_all(
            "elements => elements.map((e) => e.dataset.noticeCode || e.classList[1])"
        )
        assert kinds == ["msg-user", "msg-assistant", "stopped"], moment
        # one Regenerate for the turn, on the words it kept, not a second on the notice beneath them
        expect(tab.locator("#message-log .msg-regenerate")).to_have_count(1)
        expect(partial.locator(".msg-regenerate")).to_be_visible()


def test_a_stream_cut_off_midway_drops_the_draft_and_offers_regenerate(tab, user, endpoint, model_server):
    model_server.push(answer(SLOW_ANSWER, chunk_delay=0.15, cut=True))
    sign_in(tab, user)
    send(tab, "write slowly")
    see_a_partial_draft(tab)

    failed = tab.locator('[data-notice-code="model_failed"]')
    expect(failed).to_be_visible()
    expect(tab.locator("#draft")).to_be_hidden()
    expect(failed.locator(".msg-regenerate")).to_be_visible()
    expect(tab.locator(".msg-assistant")).to_have_count(0)
    expect(tab.locator("#composer-text")).to_be_enabled()
    assert not stored_answers()
