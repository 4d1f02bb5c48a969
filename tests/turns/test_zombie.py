"""A worker that froze past its lease writes nothing when it wakes."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models.signals import post_save
from django.utils import timezone

from agent import turns
from agent.models import Confirmation, Lock, Message, OffPurposeFlag, Turn
from agent.tasks import run_turn
from agent.turns import locks
from tests.support.model_server import answer, off_purpose, tool_calls
from tests.support.turns import messages_of

pytestmark = pytest.mark.django_db(transaction=True)


def _take_the_chat_while_the_model_thinks(model_server: Any, ref: Any, chat: Any, taken: list[Any]) -> threading.Thread:
    """Once the model has the request: the old turn's lease runs out and a new turn takes the chat."""

    def take() -> None:
        model_server.received.wait(10)
        Lock.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        taken.append(turns.start(ref, chat.pk, "a newer question", impersonated=False))

    thread = threading.Thread(target=take)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "reply",
    [
        answer("Not what I am for. " + off_purpose("poetry"), delay=1.5),
        tool_calls(("notes_create", {"title": "x"}), content=off_purpose("y"), delay=1.5),
    ],
    ids=["off-purpose answer", "write with a marker"],
)
def test_a_turn_whose_chat_was_taken_during_the_model_call_writes_nothing(
    ref, chat, endpoint, model_server, reply, caplog
):
    # given a model call that outlives the turn's lease, and a newer turn that takes the chat meanwhile
    caplog.set_level(logging.INFO, logger="agent.turns")
    model_server.push(reply)
    old = turns.start(ref, chat.pk, "write me a poem", impersonated=False)
    taken: list[Any] = []
    thread = _take_the_chat_while_the_model_thinks(model_server, ref, chat, taken)
    # when the old turn's worker wakes up with the model's answer
    run_turn(str(old.pk))
    thread.join()
    # then it wrote nothing: no answer, no flag toward blocking the user, no card
    assert [(m.role, m.notice_code, m.turn_id) for m in messages_of(chat)] == [
        ("user", "", old.pk),
        ("notice", "interrupted", old.pk),  # the sweep's notice, when the new turn started
    ]
    assert not OffPurposeFlag.objects.exists() and not Confirmation.objects.exists()
    assert Turn.objects.get(pk=old.pk).status == Turn.Status.INTERRUPTED
    assert Lock.objects.filter(holder=taken[0].pk).count() == 2  # the new turn's locks are untouched
    # and the log tells how the old turn really ended
    said = [r.getMessage() for r in caplog.records if str(old.pk) in r.getMessage()]
    assert said == [
        f"agent turn {old.pk} ended: interrupted worker_lost",
        f"agent turn {old.pk} had already ended: interrupted worker_lost; its worker stopped later (failed lock_lost)",
    ]


def test_the_off_purpose_flag_is_stored_with_the_answer(ref, chat, endpoint, model_server):
    model_server.push(answer("Not what I am for. " + off_purpose("poetry")))
    run_turn(str(turns.start(ref, chat.pk, "a poem", impersonated=False).pk))
    flag = OffPurposeFlag.objects.get()
    stored = Message.objects.get(conversation=chat, role=Message.Role.ASSISTANT)
    assert (flag.reason, stored.content) == ("poetry", "Not what I am for.")


def test_a_card_and_the_tool_message_that_names_it_are_stored_together_or_not_at_all(ref, chat, endpoint, model_server):
    # given: a write the model asks for, and a newer turn that takes the chat as soon as a card is stored
    model_server.push(tool_calls(("notes_create", {"title": "x"})))
    old = turns.start(ref, chat.pk, "make a note", impersonated=False)

    def take_the_chat() -> None:
        Lock.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        assert locks.take(locks.chat_lock(chat.pk), uuid.uuid4())

    def on_a_confirmation(sender: Any, instance: Confirmation, created: bool = False, **kwargs: Any) -> None:
        if created:
            transaction.on_commit(take_the_chat)

    post_save.connect(on_a_confirmation, sender=Confirmation, weak=False)
    try:
        run_turn(str(old.pk))
    finally:
        post_save.disconnect(on_a_confirmation, sender=Confirmation)
    # then: the card was stored with the tool message that names it, in one fenced transaction
    confirmation = Confirmation.objects.get()
    assert Message.objects.filter(conversation=chat, role=Message.Role.TOOL, confirmation=confirmation).count() == 1
