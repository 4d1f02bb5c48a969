"""The process's watcher of turns that wait on the model: one read for all of them, flagging only the
turns a stop, a lost lease or an ended actor ends, and a draft that checks itself when flagged."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any, Iterator

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent import turns
from agent.access import SessionRef, TelegramRef, actor_of
from agent.models import Lock, TelegramLink, Turn
from agent.turns import stream
from agent.turns.runner import claim
from agent.turns.watcher import BEAT_S, FULL_CHECK_EVERY_S, Watch, Watcher
from agent.turns.watcher import watcher as of_this_process
from tests.support.factories import ConversationFactory
from tests.support.sessions import login

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def watcher() -> Iterator[Watcher]:
    """A watcher of the test's own (its thread beats too, reading the same rows the same way)."""
    own = Watcher()
    yield own
    for entry in list(own._watches.values()):
        own.unwatch(entry)


def running_turn(ref: SessionRef, chat: Any) -> Turn:
    turn = turns.start(ref, chat.pk, "think hard", impersonated=False)
    claimed = claim(turn.pk)
    assert claimed is not None
    return claimed.turn


def flagged_after_a_beat(watcher: Watcher, *entries: Watch) -> list[bool]:
    watcher.beat()
    return [entry.flagged for entry in entries]


def test_one_beat_reads_every_watched_turn_in_two_statements_and_flags_none_that_may_go_on(
    watcher: Watcher, make_user: Any, endpoint: Any
) -> None:
    # given: five users, each with a turn running and waiting on the model
    entries = []
    for n in range(5):
        user = make_user(username=f"waiting{n}")
        _client, ref = login(user)
        entries.append(watcher.watch(running_turn(ref, ConversationFactory(user=user)), ref))
    # when: the watcher beats
    with CaptureQueriesContext(connection) as queries:
        flags = flagged_after_a_beat(watcher, *entries)
    # then: one statement for the turns and one for their sessions, however many wait; none is flagged
    assert len(queries) == 2
    assert flags == [False] * 5
    assert all(not entry.due(time.monotonic()) for entry in entries)


@pytest.mark.parametrize(
    "ends",
    [
        pytest.param(lambda turn, client, ref: turns.stop(ref, turn.conversation_id, impersonated=False), id="stop"),
        pytest.param(lambda turn, client, ref: client.logout(), id="sign-out"),
        pytest.param(lambda turn, client, ref: Lock.objects.filter(holder=turn.pk).delete(), id="lease lost"),
        pytest.param(
            lambda turn, client, ref: Lock.objects.filter(holder=turn.pk).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            ),
            id="lease run out",
        ),
        pytest.param(
            lambda turn, client, ref: Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.INTERRUPTED),
            id="ended by the sweep",
        ),
    ],
)
def test_a_beat_flags_the_turn_a_stop_a_sign_out_or_a_lost_lease_ends_and_no_other(
    watcher: Watcher, session: Any, user: Any, make_user: Any, endpoint: Any, ends: Any
) -> None:
    client, ref = session
    ended = running_turn(ref, ConversationFactory(user=user))
    other_user = make_user(username="bystander")
    _other_client, other_ref = login(other_user)
    bystander = running_turn(other_ref, ConversationFactory(user=other_user))
    watched, other = watcher.watch(ended, ref), watcher.watch(bystander, other_ref)
    assert flagged_after_a_beat(watcher, watched, other) == [False, False]
    ends(ended, client, ref)
    assert flagged_after_a_beat(watcher, watched, other) == [True, False]


def test_a_revoked_telegram_link_flags_its_turn(watcher: Watcher, ref: SessionRef, chat: Any, endpoint: Any) -> None:
    turn = running_turn(ref, chat)
    link = TelegramLink.objects.create(user_id=ref.user_id, chat_id=4242)
    Turn.objects.filter(pk=turn.pk).update(session_key="", telegram_link=link)
    turn.refresh_from_db()
    watched = watcher.watch(turn, actor_of(turn))
    assert isinstance(actor_of(turn), TelegramRef)
    assert flagged_after_a_beat(watcher, watched) == [False]
    TelegramLink.objects.filter(pk=link.pk).update(revoked_at=timezone.now())
    assert flagged_after_a_beat(watcher, watched) == [True]


def test_a_session_outside_sql_is_not_watched_here(
    watcher: Watcher, ref: SessionRef, chat: Any, endpoint: Any, settings: Any
) -> None:
    turn = running_turn(ref, chat)
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    assert watcher.watch(turn, ref) is None  # its turn checks itself at every beat, as before


# -- a draft of a watched turn -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The draft's ``time.monotonic``, moved by the test."""
    own = Clock()
    monkeypatch.setattr(stream.time, "monotonic", own)
    return own


def watched_draft(checks: list[float], clock: Clock) -> tuple[stream.Draft, Watch]:
    entry = Watch.__new__(Watch)
    entry.turn_id, entry.leases, entry.session_key, entry.flagged, entry.seen_at = "turn", 1, "key", False, clock.now
    draft = stream.Draft("chat", "turn", 1, check=lambda: checks.append(clock.now), watched=entry)
    return draft, entry


def test_a_watched_draft_leaves_its_check_to_the_watcher_until_the_full_check_is_due(clock: Clock) -> None:
    checks: list[float] = []
    draft, entry = watched_draft(checks, clock)
    began = clock.now
    while clock.now - began < FULL_CHECK_EVERY_S - BEAT_S:
        clock.now += 0.25
        entry.seen_at = clock.now  # the watcher beats and finds nothing
        draft.watch()
    assert checks == [began + stream.CHECK_EVERY_S]  # the first, before any beat could vouch for it
    clock.now = checks[0] + FULL_CHECK_EVERY_S
    entry.seen_at = clock.now
    draft.watch()
    assert checks[-1] == clock.now and len(checks) == 2  # the full check, for what the watcher cannot see


def test_a_flagged_draft_checks_at_once_and_one_whose_watcher_fell_behind_checks_every_half_second(
    clock: Clock,
) -> None:
    checks: list[float] = []
    draft, entry = watched_draft(checks, clock)
    clock.now += stream.CHECK_EVERY_S
    draft.watch()
    entry.seen_at = clock.now
    clock.now += 0.1
    entry.flagged = True  # a stop, read by the beat just now
    draft.watch()
    assert checks[-1] == clock.now and not entry.flagged
    # the watcher stops beating: the draft checks itself at the old pace
    stalled_since = clock.now
    for _ in range(8):
        clock.now += 0.25
        draft.watch()
    assert [at - stalled_since for at in checks[2:]] == pytest.approx([1.0, 1.5, 2.0])


def test_a_forked_child_starts_with_nothing_watched_no_lock_held_and_no_thread_yet() -> None:
    of_this_process._watches["a parent's turn"] = Watch.__new__(Watch)
    try:
        with of_this_process._lock:  # held by another thread of the parent at the fork
            child = os.fork()
            if child == 0:
                fresh = not of_this_process._watches and not of_this_process._started
                os._exit(0 if fresh and not of_this_process._lock.locked() else 1)
        _pid, status = os.waitpid(child, 0)
    finally:
        del of_this_process._watches["a parent's turn"]
    assert os.waitstatus_to_exitcode(status) == 0
