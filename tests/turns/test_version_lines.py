"""The active line holds under versions: a card that leaves it, a notice stored while it moves, an
edit stopped before it ran. After each, the line is one path and nothing the user wrote or saw is lost.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from agent import confirmations, turns
from agent.conversations import get_conversation, get_message
from agent.core.errors import NotWaiting
from agent.models import Confirmation, Message
from agent.tasks import run_turn
from tests.notes.models import Note
from tests.support.model_server import answer, tool_calls
from tests.support.races import waiting_on_locks
from tests.support.turns import one_active_line
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def ask(ref: Any, chat: Any, text: str) -> None:
    run_turn(str(turns.start(ref, chat.pk, text, impersonated=False).pk))


def shown(ref: Any, chat: Any) -> list[tuple[str, str]]:
    """The active line as a client sees it: (role, content or notice code)."""
    view = get_conversation(ref, chat.pk, impersonated=False)
    return [(m["role"], m["content"] or m["notice_code"] or "") for m in view["messages"]]


@pytest.fixture
def waiting_confirmation(ref: Any, chat: Any, endpoint: Any, model_server: Any) -> Confirmation:
    """A chat whose last answer proposed a note: its card waits."""
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    ask(ref, chat, "note: buy milk")
    return Confirmation.objects.get(status=Confirmation.Status.WAITING)


# -- a card whose message leaves the line ---------------------------------------------------------


def test_regenerate_while_a_card_waits_cancels_it_and_the_new_answer_may_propose_it_again(
    ref: Any, chat: Any, waiting_confirmation: Confirmation, model_server: Any
) -> None:
    # when: the answer that proposed the note is answered again, and proposes the same note
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    tool_message = Message.objects.get(confirmation=waiting_confirmation, role=Message.Role.TOOL)
    run_turn(str(turns.regenerate(ref, chat.pk, tool_message.pk, impersonated=False).pk))
    # then: the old card is cancelled, saying why, and the new one waits on the line shown
    old = Confirmation.objects.get(pk=waiting_confirmation.pk)
    assert (old.status, old.outcome) == (Confirmation.Status.CANCELLED, "left_line")
    new = Confirmation.objects.get(status=Confirmation.Status.WAITING)
    line = one_active_line(chat)
    assert [m.confirmation_id for m in line if m.role == Message.Role.TOOL] == [new.pk]
    # and: a switch back shows the old card, cancelled, with the notice that says so after it
    turns.switch_version(ref, chat.pk, tool_message.pk, impersonated=False)
    assert shown(ref, chat)[-2:] == [("tool", ""), ("notice", "confirmation_left_line")]
    one_active_line(chat)
    with pytest.raises(NotWaiting):
        confirmations.confirm(ref, waiting_confirmation.pk, impersonated=False)
    assert not Note.objects.exists()


def test_an_edit_while_a_card_waits_cancels_it(
    ref: Any, chat: Any, waiting_confirmation: Confirmation, model_server: Any
) -> None:
    model_server.push(answer("A note about bread, then?"))
    asked = Message.objects.get(role=Message.Role.USER)
    run_turn(str(turns.edit_message(ref, chat.pk, asked.pk, "note: buy bread", impersonated=False).pk))
    assert Confirmation.objects.get(pk=waiting_confirmation.pk).status == Confirmation.Status.CANCELLED
    assert shown(ref, chat) == [("user", "note: buy bread"), ("assistant", "A note about bread, then?")]
    one_active_line(chat)


# -- a notice stored while the line moves ----------------------------------------------------------


@pytest.mark.parametrize("first", ["confirm", "switch"])
def test_a_card_decided_while_the_line_switches_leaves_one_active_line(
    ref: Any, chat: Any, endpoint: Any, model_server: Any, first: str
) -> None:
    # given: a question answered twice, the second time with a card that waits on the line shown
    model_server.push(answer("Or not."), tool_calls(("notes_create", {"title": "Buy milk"})))
    ask(ref, chat, "note: buy milk")
    other = Message.objects.get(content="Or not.")
    run_turn(str(turns.regenerate(ref, chat.pk, other.pk, impersonated=False).pk))
    confirmation = Confirmation.objects.get(status=Confirmation.Status.WAITING)
    # when: the card is confirmed while a switch goes back to the first answer, the one that starts
    # first holding its transaction open until the other waits on its locks (or ended without waiting)
    began, release, outcomes = threading.Event(), threading.Event(), {}

    def confirm() -> Any:
        return confirmations.confirm(ref, confirmation.pk, impersonated=False).status

    def switch() -> Any:
        return turns.switch_version(ref, chat.pk, other.pk, impersonated=False)

    def run(name: str, call: Any, leads: bool) -> None:
        try:
            with transaction.atomic():
                outcomes[name] = call()
                began.set()
                if leads:
                    release.wait(10)
        except Exception as error:
            outcomes[name] = type(error).__name__
        finally:
            began.set()
            connection.close()

    calls = {"confirm": confirm, "switch": switch}
    leader = threading.Thread(target=run, args=(first, calls[first], True))
    leader.start()
    began.wait(10)
    second = "switch" if first == "confirm" else "confirm"
    follower = threading.Thread(target=run, args=(second, calls[second], False))
    follower.start()
    wait_until(lambda: second in outcomes or waiting_on_locks(), what=f"the {second} to meet the {first}'s locks")
    release.set()
    leader.join(20), follower.join(20)
    # then: the switch happened, the line is one path ending in the first answer, and the card was
    # decided once: confirmed before the switch, or cancelled by it (its message left the line)
    assert outcomes["switch"] is True
    assert one_active_line(chat)[-1].pk == other.pk
    decided = Confirmation.objects.get(pk=confirmation.pk).status
    expected = {"confirm": (Confirmation.Status.DONE, 1), "switch": (Confirmation.Status.CANCELLED, 0)}[first]
    assert (decided, Note.objects.count()) == expected
    assert Message.objects.filter(confirmation=confirmation, role=Message.Role.NOTICE, active=False).count() == 1


# -- an edit stopped before it ran --------------------------------------------------------------------


def test_an_edit_stopped_before_it_runs_keeps_the_edited_text_on_the_line(
    ref: Any, chat: Any, endpoint: Any, model_server: Any
) -> None:
    model_server.push(answer("Cats purr."))
    ask(ref, chat, "cats?")
    original = Message.objects.get(role=Message.Role.USER)
    # when: the edit's turn is stopped before a worker takes it
    turn = turns.edit_message(ref, chat.pk, original.pk, "kittens?", impersonated=False)
    turns.stop(ref, chat.pk, impersonated=False)
    run_turn(str(turn.pk))
    # then: the edited text is shown in the original's place, as its second version, then the stop
    assert shown(ref, chat) == [("user", "kittens?"), ("notice", "stopped")]
    line = one_active_line(chat)
    assert get_message(ref, chat.pk, line[0].pk, impersonated=False)["versions"]["index"] == 2
    assert model_server.requests == [model_server.requests[0]]  # the model was never asked about kittens
