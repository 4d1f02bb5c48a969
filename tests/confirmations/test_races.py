"""Cards against real PostgreSQL transactions: a double click runs the write once."""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest
from django.db import connection

from agent import confirmations, turns
from agent.conversations import create_conversation, get_conversation
from agent.core.errors import NotWaiting
from agent.models import Confirmation, Message
from agent.tasks import run_turn
from tests.notes.models import Note
from tests.support.model_server import tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def at_once(*actions: Callable[[], Any]) -> list[Any]:
    """Run each action in its own thread and database connection, released together."""
    barrier = threading.Barrier(len(actions))
    results: list[Any] = [None] * len(actions)

    def worker(index: int, action: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = action()
        except Exception as error:  # the outcome of each click is what the test looks at
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_a_double_click_runs_the_write_exactly_once(ref, user, propose):
    for attempt in range(10):
        confirmation = propose("notes_create", {"title": f"Note {attempt}"}, call_id=f"call_{attempt}")

        def click(confirmation_id: Any = confirmation.pk) -> Any:
            return confirmations.confirm(ref, confirmation_id, impersonated=False)

        results = at_once(click, click)

        statuses = sorted(type(r).__name__ if isinstance(r, Exception) else r.status for r in results)
        assert statuses == ["NotWaiting", "done"], (attempt, results)
        assert Note.objects.filter(title=f"Note {attempt}").count() == 1
        assert Message.objects.filter(confirmation=confirmation, role=Message.Role.NOTICE).count() == 1
    assert Note.objects.count() == 10


def test_confirm_and_cancel_at_once_decide_the_card_once(ref, user, propose):
    for attempt in range(10):
        confirmation = propose("notes_create", {"title": f"Race {attempt}"}, call_id=f"call_{attempt}")

        results = at_once(
            lambda confirmation_id=confirmation.pk: confirmations.confirm(ref, confirmation_id, impersonated=False),
            lambda confirmation_id=confirmation.pk: confirmations.cancel(ref, confirmation_id, impersonated=False),
        )

        decided = [r for r in results if isinstance(r, Confirmation)]
        refused = [r for r in results if isinstance(r, NotWaiting)]
        assert (len(decided), len(refused)) == (1, 1), (attempt, results)
        stored = Confirmation.objects.get(pk=confirmation.pk).status
        assert stored == decided[0].status
        assert Note.objects.filter(title=f"Race {attempt}").count() == (1 if stored == "done" else 0)
        assert Message.objects.filter(confirmation=confirmation, role=Message.Role.NOTICE).count() == 1


def test_a_card_from_a_scripted_turn_is_confirmed_once(ref, user, endpoint, model_server):
    # given a turn whose model asked for a write
    chat = create_conversation(ref, {}, impersonated=False)
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    turn = turns.start(ref, chat.pk, "make a note to buy milk", impersonated=False)
    run_turn(str(turn.pk))
    confirmation = Confirmation.objects.get(conversation=chat)
    assert (confirmation.status, confirmation.turn_id) == ("waiting", turn.pk)
    assert not Note.objects.exists()

    # when the user clicks Confirm twice at once
    at_once(*[lambda: confirmations.confirm(ref, confirmation.pk, impersonated=False)] * 2)

    # then the note exists once and the chat shows one outcome
    assert list(Note.objects.values_list("owner", "title")) == [(user.pk, "Buy milk")]
    codes = [
        m["notice_code"]
        for m in get_conversation(ref, chat.pk, impersonated=False)["messages"]
        if m["role"] == "notice"
    ]
    assert codes == ["confirmation_done"]
