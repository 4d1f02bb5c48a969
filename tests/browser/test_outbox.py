"""The user's words are never lost (issue 7, defect 6): shown at once as pending, and back in the
composer, with a notice, when their turn ends without storing them."""

from __future__ import annotations

import re
from contextlib import ExitStack
from typing import Any, Callable, Iterator

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from agent.models import Message, Turn
from tests.support.browser import send, sign_in
from tests.support.factories import ConversationFactory, TurnFactory, UserSettingsFactory
from tests.support.model_server import answer
from tests.support.workers import thread_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GIVEN_BACK = "Your message was not sent. It is back in the message box."


@pytest.fixture(scope="module")
def worker() -> None:
    """No worker while the page sends: the turn stays queued until a test calls ``late_worker``."""
    return None


@pytest.fixture
def late_worker(django_db_setup: Any) -> Iterator[Callable[[], None]]:
    """Starts a Celery worker on this run's queue when called; it claims whatever is queued."""
    with ExitStack() as running:

        def start() -> None:
            running.enter_context(thread_worker())

        yield start


def test_the_words_show_at_once_and_say_sending_only_until_the_server_took_them(tab, user, endpoint):
    sign_in(tab, user)
    with tab.expect_response(re.compile(r"/send/$")) as sent:
        send(tab, "are you there?")
    assert sent.value.ok
    # taken: its turn is queued, so "Sending…" goes at once, though no worker has stored the words yet
    outbox = tab.locator(".msg-outbox")
    expect(outbox.locator(".bubble")).to_have_text("are you there?")
    expect(outbox).to_have_class(re.compile(r"\bmsg-outbox-taken\b"), timeout=1000)
    expect(outbox.locator(".outbox-status")).to_have_count(0)
    expect(tab.locator("#composer-text")).to_have_value("")
    expect(tab.locator("#stop")).to_be_visible()
    expect(tab.locator(".msg-user")).to_have_count(0)  # queued: nothing is stored until a worker runs the turn


def test_stop_before_a_worker_claims_the_turn_gives_the_words_back(tab, user, endpoint, model_server, late_worker):
    model_server.push(answer("never asked"))
    sign_in(tab, user)
    send(tab, "keep these words\nboth lines")
    expect(tab.locator(".msg-outbox .bubble")).to_have_text("keep these words\nboth lines")
    with tab.expect_response(re.compile(r"/stop/$")) as stopped:
        tab.locator("#stop").click()
    assert stopped.value.ok and stopped.value.json() == {"asked": True}

    late_worker()  # claims the turn, finds it stopped, ends it before storing anything

    expect(tab.locator("#composer-text")).to_have_value("keep these words\nboth lines")
    expect(tab.locator("#composer-note")).to_have_text(GIVEN_BACK)
    expect(tab.locator(".msg-outbox")).to_have_count(0)
    expect(tab.locator("#composer-text")).to_be_enabled()
    expect(tab.locator("#stop")).to_be_hidden()
    assert not Message.objects.filter(role=Message.Role.USER).exists()
    assert list(Turn.objects.values_list("status", flat=True)) != ["queued"]


def test_stop_after_the_words_were_stored_gives_nothing_back(tab, user, endpoint, model_server, late_worker):
    model_server.push(answer("too late", delay=3))
    late_worker()
    sign_in(tab, user)
    send(tab, "take your time")
    expect(tab.locator(".msg-user .bubble")).to_have_text("take your time")
    expect(tab.locator(".msg-outbox")).to_have_count(0)
    tab.locator("#stop").click()
    expect(tab.locator('[data-notice-code="stopped"] .notice-text')).to_have_text("Stopped.")
    expect(tab.locator("#composer-text")).to_be_enabled()
    expect(tab.locator("#composer-text")).to_have_value("")
    expect(tab.locator("#composer-note")).to_have_text("")


def test_a_refusal_at_the_start_leaves_the_words_in_the_composer_with_the_error(tab, user, endpoint):
    UserSettingsFactory(user=user, daily_turns_cap=1)
    TurnFactory(
        conversation=ConversationFactory(user=user),
        user=user,
        language="en",
        text="earlier",
        status=Turn.Status.FINISHED,
        deadline_at=timezone.now(),
    )
    sign_in(tab, user)
    send(tab, "one more, please")
    expect(tab.locator("#composer-error")).to_contain_text("You have used 1 of your 1 turns for 24 hours.")
    expect(tab.locator("#composer-text")).to_have_value("one more, please")
    expect(tab.locator(".msg-outbox")).to_have_count(0)
    expect(tab.locator("#composer-text")).to_be_enabled()
