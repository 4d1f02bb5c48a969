"""Leases for turns: one row per lock, taken in one statement, fenced, released by its holder."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agent.models import Lock, Turn
from agent.turns import locks
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db


def a_turn(slot: str = "user:1:0") -> Turn:
    """A turn as the lock functions see it: its ref, its chat, its user slot (no row needed)."""
    return Turn(id=uuid.uuid4(), conversation_id=uuid.uuid4(), user_slot=slot)


def take_all(turn: Turn) -> None:
    for name in locks.turn_locks(turn):
        assert locks.take(name, turn.pk)


def expire(*names: str) -> None:
    Lock.objects.filter(name__in=names).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_take_inserts_a_lease_of_lock_lease_s() -> None:
    holder = uuid.uuid4()
    before = timezone.now()
    with agent_conf(LOCK_LEASE_S=42):
        assert locks.take("chat:x", holder) is True
    row = Lock.objects.get(name="chat:x")
    assert (row.holder, row.fence) == (holder, 1)
    assert before + timedelta(seconds=41) < row.expires_at <= timezone.now() + timedelta(seconds=42)


def test_a_live_lease_cannot_be_taken_not_even_by_its_holder() -> None:
    holder = uuid.uuid4()
    assert locks.take("chat:x", holder)
    assert locks.take("chat:x", uuid.uuid4()) is False
    assert locks.take("chat:x", holder) is False
    assert Lock.objects.get(name="chat:x").holder == holder


def test_an_expired_lease_is_taken_over_and_the_fence_grows() -> None:
    first, second, third = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    assert locks.take("chat:x", first)
    expire("chat:x")
    assert locks.take("chat:x", second)
    row = Lock.objects.get(name="chat:x")
    assert (row.holder, row.fence) == (second, 2) and row.expires_at > timezone.now()
    expire("chat:x")
    assert locks.take("chat:x", third)
    assert Lock.objects.get(name="chat:x").fence == 3


def test_take_is_one_statement(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(1):
        locks.take("chat:x", uuid.uuid4())


def test_held_is_one_query_and_true_while_all_leases_live(django_assert_num_queries: Any) -> None:
    turn = a_turn()
    take_all(turn)
    with django_assert_num_queries(1):
        assert locks.held(turn) is True


@pytest.mark.parametrize("lost", ["chat", "slot"])
def test_held_is_false_when_one_lease_ran_out_or_was_taken(lost: str) -> None:
    turn = a_turn()
    take_all(turn)
    name = locks.chat_lock(turn.conversation_id) if lost == "chat" else turn.user_slot
    expire(name)
    assert locks.held(turn) is False
    assert locks.take(name, uuid.uuid4())
    assert locks.held(turn) is False


def test_renew_extends_a_live_lease() -> None:
    turn = a_turn()
    take_all(turn)
    Lock.objects.update(expires_at=timezone.now() + timedelta(seconds=2))
    assert locks.renew(turn) is True
    assert all(row.expires_at > timezone.now() + timedelta(seconds=20) for row in Lock.objects.all())


def test_renew_cannot_bring_back_a_lease_that_ran_out_or_was_taken() -> None:
    turn = a_turn()
    take_all(turn)
    expire(turn.user_slot)
    assert locks.renew(turn) is False
    assert locks.held(turn) is False
    name, newer = locks.chat_lock(turn.conversation_id), uuid.uuid4()
    expire(name)
    assert locks.take(name, newer)
    assert locks.renew(turn) is False
    assert Lock.objects.get(name=name).holder == newer


def test_reclaim_extends_a_run_out_lease_still_naming_its_holder_but_not_one_taken() -> None:
    turn = a_turn()
    take_all(turn)
    expire(*locks.turn_locks(turn))
    assert locks.reclaim(turn) is True and locks.held(turn) is True
    expire(turn.user_slot)
    assert locks.take(turn.user_slot, uuid.uuid4())
    assert locks.reclaim(turn) is False


def test_release_deletes_only_the_rows_its_turn_still_holds() -> None:
    turn, bystander = a_turn(), a_turn("user:2:0")
    take_all(turn)
    take_all(bystander)
    chat, newer = locks.chat_lock(turn.conversation_id), uuid.uuid4()
    expire(chat)
    assert locks.take(chat, newer)
    locks.release(turn)
    assert set(Lock.objects.values_list("name", "holder")) == {
        (chat, newer),
        *((n, bystander.pk) for n in locks.turn_locks(bystander)),
    }


def test_user_slots_follow_max_turns_per_user() -> None:
    with agent_conf(MAX_TURNS_PER_USER=2):
        first, second, third = (locks.take_user_slot(7, uuid.uuid4()) for _ in range(3))
    assert (first, second, third) == ("user:7:0", "user:7:1", None)


def test_fence_is_true_only_for_the_holder_of_a_live_chat_lease() -> None:
    turn = a_turn()
    take_all(turn)
    with transaction.atomic():
        assert locks.fence(turn) is True
    expire(locks.chat_lock(turn.conversation_id))
    with transaction.atomic():
        assert locks.fence(turn) is False


def test_no_advisory_lock_is_held_for_a_turn() -> None:
    take_all(a_turn())
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 0


def take_at_once(name: str, contenders: int) -> list[bool]:
    """Each contender takes ``name`` on its own connection, released together; who won."""
    barrier = threading.Barrier(contenders)
    won: list[bool] = []

    def contend() -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=5)
            won.append(locks.take(name, uuid.uuid4()))
        finally:
            connection.close()

    threads = [threading.Thread(target=contend) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "a contender hung"
    return won


@pytest.mark.django_db(transaction=True)
def test_threads_taking_one_lock_at_once_exactly_one_wins() -> None:
    for attempt in range(20):
        name = f"chat:race-{attempt}"
        if attempt % 2:  # half the rounds race for a takeover of a lease that ran out
            locks.take(name, uuid.uuid4())
            expire(name)
        won = take_at_once(name, 2 + attempt % 3)
        assert won.count(True) == 1 and len(won) == 2 + attempt % 3, (attempt, won)


def skew_host_clock(monkeypatch: Any, by: timedelta) -> None:
    """This process's clock runs ``by`` off the database's (as another host's might)."""
    real = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real() + by)


def test_a_host_clock_running_ahead_does_not_take_a_live_lease(monkeypatch: Any) -> None:
    holder = uuid.uuid4()
    assert locks.take("chat:x", holder)
    skew_host_clock(monkeypatch, timedelta(minutes=5))
    assert locks.take("chat:x", uuid.uuid4()) is False
    assert Lock.objects.get(name="chat:x").holder == holder


def test_a_host_clock_running_behind_does_not_keep_a_lease_that_ran_out(monkeypatch: Any) -> None:
    turn = a_turn()
    take_all(turn)
    expire(*locks.turn_locks(turn))
    skew_host_clock(monkeypatch, timedelta(minutes=-5))
    assert locks.held(turn) is False
    assert locks.renew(turn) is False
    with transaction.atomic():
        assert locks.fence(turn) is False
    assert locks.take(locks.chat_lock(turn.conversation_id), uuid.uuid4()) is True


def test_a_lease_taken_by_a_host_whose_clock_runs_behind_lasts_lock_lease_s_by_the_databases(
    monkeypatch: Any,
) -> None:
    skew_host_clock(monkeypatch, timedelta(minutes=-5))
    assert locks.take("chat:x", uuid.uuid4())
    monkeypatch.undo()
    assert Lock.objects.get(name="chat:x").expires_at > timezone.now() + timedelta(seconds=20)
