"""How a turn ends, however it ends, and the sweep for dead workers and lost queues."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Iterator

import pytest
from celery.signals import before_task_publish
from django.utils import timezone

from agent import turns
from agent.access import SessionRef
from agent.conversations import create_conversation, delete_conversation
from agent.core.errors import Busy
from agent.models import Lock, Message, Turn
from agent.tasks import run_turn, sweep_turns
from agent.turns import locks, monitor, runner
from tests.support.model_server import answer
from tests.support.turns import agent_conf, messages_of

pytestmark = pytest.mark.django_db
Status = Turn.Status


@pytest.fixture
def published() -> Iterator[list[Any]]:
    """The refs of ``agent.run_turn`` messages sent to the broker during the test."""
    sent: list[Any] = []

    def record(sender: Any = None, body: Any = None, **kwargs: Any) -> None:
        if sender == "agent.run_turn":
            sent.append(list(body[0]))

    before_task_publish.connect(record, weak=False)
    yield sent
    before_task_publish.disconnect(record)


def running(ref: SessionRef, chat: Any) -> Turn:
    """A turn a worker has claimed."""
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    claimed = runner.claim(turn.pk)
    assert claimed is not None
    return claimed.turn


def expire_leases(turn: Turn) -> None:
    Lock.objects.filter(holder=turn.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def notices(chat: Any) -> list[str]:
    return [m.notice_code for m in messages_of(chat) if m.role == Message.Role.NOTICE]


def test_end_turn_is_idempotent(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    turn = running(ref, chat)
    assert monitor.end_turn(turn, Status.STOPPED) is True
    assert monitor.end_turn(turn, Status.STOPPED) is False
    assert monitor.end_turn(Turn.objects.get(pk=turn.pk), Status.INTERRUPTED) is False
    assert notices(chat) == ["stopped"]
    row = Turn.objects.get(pk=turn.pk)
    assert (row.status, row.session_key) == ("stopped", "") and row.ended_at is not None
    assert not Lock.objects.exists()


@pytest.mark.parametrize(
    "status, reason, notice",
    [
        (Status.STOPPED, "", "stopped"),
        (Status.DEADLINE, "", "deadline"),
        (Status.INTERRUPTED, "store_failed", "interrupted"),
        (Status.FAILED, "session_ended", "session_ended"),
        (Status.FAILED, "forbidden", "forbidden"),
        (Status.FAILED, "lock_lost", "lock_lost"),
        (Status.FAILED, "chat_gone", None),
        (Status.FAILED, "model_failed", None),  # the runner wrote its model_failed notice itself
        (Status.FINISHED, "", None),
    ],
)
def test_end_turn_writes_the_notice_its_end_calls_for(
    ref: SessionRef, chat: Any, endpoint: Any, status: str, reason: str, notice: str | None
) -> None:
    monitor.end_turn(running(ref, chat), status, reason=reason)
    assert notices(chat) == ([notice] if notice else [])


def test_end_turn_in_a_deleted_chat_ends_it_without_a_notice(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    turn = running(ref, chat)
    delete_conversation(ref, chat.pk, impersonated=False)
    assert monitor.end_turn(turn, Status.INTERRUPTED) is True
    assert notices(chat) == [] and Turn.objects.get(pk=turn.pk).status == "interrupted"
    assert not Lock.objects.exists()


def test_end_turn_releases_only_its_own_locks(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    turn, newer = running(ref, chat), uuid.uuid4()
    expire_leases(turn)
    assert locks.take(locks.chat_lock(chat.pk), newer)
    monitor.end_turn(turn, Status.FAILED, reason="lock_lost")
    assert list(Lock.objects.values_list("holder", flat=True)) == [newer]


def test_sweep_ends_a_running_turn_whose_lease_ran_out_and_frees_the_chat(
    ref: SessionRef, chat: Any, endpoint: Any
) -> None:
    dead = running(ref, chat)
    expire_leases(dead)
    assert sweep_turns() == 1
    row = Turn.objects.get(pk=dead.pk)
    assert (row.status, row.session_key) == ("interrupted", "")
    assert notices(chat) == ["interrupted"]
    assert not Lock.objects.filter(holder=dead.pk).exists()
    assert turns.start(ref, chat.pk, "again", impersonated=False).status == "queued"


def test_start_sweeps_its_chat_first(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    dead = running(ref, chat)
    expire_leases(dead)
    fresh = turns.start(ref, chat.pk, "again", impersonated=False)
    assert Turn.objects.get(pk=dead.pk).status == "interrupted"
    assert notices(chat) == ["interrupted"] and fresh.status == "queued"


def test_start_leaves_a_running_turn_with_a_live_lease_and_the_dead_turns_of_other_chats(
    ref: SessionRef, chat: Any, endpoint: Any
) -> None:
    alive = running(ref, chat)
    other_chat = create_conversation(ref, {}, impersonated=False)
    dead_elsewhere = running(ref, other_chat)
    expire_leases(dead_elsewhere)
    with pytest.raises(Busy):
        turns.start(ref, chat.pk, "again", impersonated=False)
    assert Turn.objects.get(pk=alive.pk).status == "running" and notices(chat) == []
    assert Turn.objects.get(pk=dead_elsewhere.pk).status == "running"  # ended by the beat's sweep or its chat's start


def test_sweep_leaves_a_running_turn_with_a_live_lease(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    alive = running(ref, chat)
    assert monitor.sweep() == 0
    assert Turn.objects.get(pk=alive.pk).status == "running" and notices(chat) == []


def test_sweep_queues_again_a_turn_still_queued_after_queued_requeue_s(
    ref: SessionRef, chat: Any, endpoint: Any, published: list[Any]
) -> None:
    # given: a turn the broker lost, queued 31 s ago; its leases ran out meanwhile, nobody took them
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(seconds=31))
    expire_leases(turn)
    monitor.sweep()
    assert published == [[str(turn.pk)]]
    assert Turn.objects.get(pk=turn.pk).status == "queued"
    assert locks.held(turn)  # its leases are back, so the worker that claims it holds the chat
    assert notices(chat) == []


def test_sweep_does_not_queue_again_a_turn_queued_recently(
    ref: SessionRef, chat: Any, endpoint: Any, published: list[Any]
) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    with agent_conf(QUEUED_REQUEUE_S=60):
        Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(seconds=31))
        monitor.sweep()
    assert published == []


def test_sweep_ends_a_queued_turn_past_its_deadline(
    ref: SessionRef, chat: Any, endpoint: Any, published: list[Any]
) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    Turn.objects.filter(pk=turn.pk).update(
        created_at=timezone.now() - timedelta(seconds=200), deadline_at=timezone.now() - timedelta(seconds=1)
    )
    monitor.sweep()
    assert published == []
    assert Turn.objects.get(pk=turn.pk).status == "interrupted" and notices(chat) == ["interrupted"]


def test_sweep_ends_a_queued_turn_whose_chat_lease_is_no_longer_its_own(
    ref: SessionRef, chat: Any, endpoint: Any, published: list[Any]
) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(seconds=31))
    expire_leases(turn)
    Lock.objects.filter(name=locks.chat_lock(chat.pk)).update(holder=uuid.uuid4())  # not by a take: none can
    monitor.sweep()
    assert published == [] and Turn.objects.get(pk=turn.pk).status == "interrupted"


def test_a_worker_claiming_a_turn_that_waited_past_its_lease_gets_it_back(
    ref: SessionRef, chat: Any, endpoint: Any
) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    expire_leases(turn)  # a busy broker: nothing renews a queued turn's lease
    claimed = runner.claim(turn.pk)
    assert claimed is not None and claimed.leases_held and locks.held(claimed.turn)


def test_request_stop_marks_only_a_live_turn(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    turn = running(ref, chat)
    assert monitor.request_stop(turn.pk) is True
    assert monitor.request_stop(turn.pk) is False
    monitor.end_turn(turn, Status.STOPPED)
    other = turns.start(ref, chat.pk, "again", impersonated=False)
    monitor.end_turn(other, Status.FINISHED)
    assert monitor.request_stop(other.pk) is False


def test_a_queued_turn_whose_leases_lapsed_keeps_its_slot_when_its_user_starts_in_another_chat(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, model_server: Any
) -> None:
    # given: a turn that waits for a busy worker past its leases
    waiting = turns.start(ref, chat.pk, "my question", impersonated=False)
    expire_leases(waiting)
    # when: its user starts a turn in another chat
    elsewhere = turns.start(ref, create_conversation(ref, {}, impersonated=False).pk, "other", impersonated=False)
    # then: the new turn takes a free slot, and the waiting one runs and stores its question
    assert elsewhere.user_slot == locks.user_slots(user.pk)[1]
    model_server.push(answer("the answer"))
    run_turn(str(waiting.pk))
    assert Turn.objects.get(pk=waiting.pk).status == Status.FINISHED
    assert [(m.role, m.content) for m in messages_of(chat)] == [("user", "my question"), ("assistant", "the answer")]


def test_a_queued_turn_whose_leases_lapsed_keeps_its_chat_when_its_user_starts_there_again(
    ref: SessionRef, chat: Any, endpoint: Any, model_server: Any
) -> None:
    waiting = turns.start(ref, chat.pk, "my question", impersonated=False)
    expire_leases(waiting)
    with pytest.raises(Busy):
        turns.start(ref, chat.pk, "again", impersonated=False)
    model_server.push(answer("the answer"))
    run_turn(str(waiting.pk))
    assert Turn.objects.get(pk=waiting.pk).status == Status.FINISHED
    assert [(m.role, m.content) for m in messages_of(chat)] == [("user", "my question"), ("assistant", "the answer")]


def test_a_queued_turn_past_its_deadline_no_longer_keeps_its_chat(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    waiting = turns.start(ref, chat.pk, "my question", impersonated=False)
    expire_leases(waiting)
    Turn.objects.filter(pk=waiting.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert turns.start(ref, chat.pk, "again", impersonated=False).status == Status.QUEUED


def test_the_sweep_sends_a_turn_still_queued_again_once_per_lease(
    ref: SessionRef, chat: Any, endpoint: Any, published: list[Any]
) -> None:
    # given: a turn queued 31 s ago that no worker has claimed, its leases run out
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(seconds=31))
    expire_leases(turn)
    # when: the sweep runs three times within one lease, then once more after it
    for _sweep in range(3):
        monitor.sweep()
    sent_within_one_lease = list(published)
    expire_leases(turn)
    monitor.sweep()
    # then: it was sent once per lease
    assert sent_within_one_lease == [[str(turn.pk)]]
    assert published == [[str(turn.pk)], [str(turn.pk)]]
    assert Turn.objects.get(pk=turn.pk).status == Status.QUEUED


def test_the_sweep_judges_leases_by_the_databases_clock(
    ref: SessionRef, chat: Any, endpoint: Any, monkeypatch: Any
) -> None:
    alive = running(ref, chat)
    real = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real() + timedelta(minutes=5))
    assert monitor.sweep() == 0
    assert Turn.objects.get(pk=alive.pk).status == Status.RUNNING
