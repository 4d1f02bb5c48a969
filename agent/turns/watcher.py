"""The turns of this process that wait on the model, watched together: two statements a beat for all.

A stop, a lost lease or a sign-out must end a streamed model call within a second, even while the
model sends nothing. A turn's full check (``fenced.Fence.verify``) reads everything a step needs, so
running it for each waiting turn twice a second costs a statement per turn per beat: 200 turns in
flight, 400 statements a second that nearly always pass. Instead one thread per process reads, for
every turn it watches, what ends a waiting turn at once (the turn's status and stop mark, its leases,
its session row or Telegram link) in one statement for the turns and one for their sessions, and
flags a turn where something changed. A turn's own check then runs only when it is flagged, when the
watcher has fallen behind, and at least every ``FULL_CHECK_EVERY_S`` for what this read cannot see
(rights lost, a password changed elsewhere, the assistant switched off), which end the turn at its
next step in any case.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import Exists, OuterRef
from django.db.models.functions import Now

from ..access import Actor, SessionRef, TelegramRef, sessions_in_sql
from ..core import pooled
from ..models import TelegramLink, Turn
from . import locks

logger = logging.getLogger(__name__)

BEAT_S = 0.5
"""How often the watcher reads its turns: with the turn's check after it, a stop ends a silent stream in a second."""

FULL_CHECK_EVERY_S = 5.0
"""How often a watched turn still runs its own full check while it waits (rights, the site switch, the password)."""


class Watch:
    """One turn's place in the watcher: ``due()`` says when the turn's own check must run."""

    def __init__(self, turn: Turn, session_key: str | None) -> None:
        self.turn_id = turn.pk
        self.leases = len(locks.turn_locks(turn))
        self.session_key = session_key  # None: a Telegram link, read by the turn's row
        self.flagged = False
        self.seen_at = float("-inf")  # when a beat last read this turn and found nothing

    def due(self, now: float) -> bool:
        """True when the turn must check itself: something changed, or no beat read it lately."""
        return self.flagged or now - self.seen_at > 2 * BEAT_S


class Watcher:
    """The process's watching thread and the turns it reads; started at the first ``watch`` of a
    process (a forked worker child starts its own)."""

    def __init__(self) -> None:
        self._begin()

    def _begin(self) -> None:
        """Nothing watched and no thread yet: at creation, and in a forked child, where the parent's
        thread did not come along and its lock may have been held at the fork."""
        self._watches: dict[Any, Watch] = {}
        self._lock = threading.Lock()
        self._waiting = threading.Condition(self._lock)
        self._started = False
        self._failing = False  # the last beat could not read: warned once until one can

    def watch(self, turn: Turn, actor: Actor) -> Watch | None:
        """Watch ``turn`` until ``unwatch``; None where its actor is not read here (a session of
        an engine outside SQL): that turn checks itself at every beat, as before."""
        if isinstance(actor, TelegramRef):
            entry = Watch(turn, None)
        elif isinstance(actor, SessionRef) and sessions_in_sql():
            entry = Watch(turn, actor.session_key)
        else:
            return None
        with self._lock:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="agent-turn-watcher", daemon=True).start()
            self._watches[turn.pk] = entry
            self._waiting.notify()
        return entry

    def unwatch(self, entry: Watch) -> None:
        with self._lock:
            if self._watches.get(entry.turn_id) is entry:
                del self._watches[entry.turn_id]

    def _run(self) -> None:
        while True:
            if not self._watches:
                connection.close()  # nothing to watch: no connection held meanwhile
                with self._lock:
                    while not self._watches:
                        self._waiting.wait()
            time.sleep(BEAT_S)
            try:
                self.beat()
            except Exception:  # the turns check themselves meanwhile: their watches go stale
                logger.exception("agent: the turn watcher's beat failed")

    def beat(self) -> None:
        """Read every watched turn once and flag those a stop, a lost lease or an ended actor ends."""
        with self._lock:
            watching = list(self._watches.values())
        if not watching:
            return
        read_at = time.monotonic()
        try:
            live = _live_turns(watching)
        except DatabaseError:
            if not self._failing:
                logger.warning("agent: the turn watcher cannot read its turns; each checks itself meanwhile")
            self._failing = True
            connection.close()  # the next beat opens a fresh one
            return
        finally:
            pooled.give_back()
        self._failing = False
        for entry in watching:
            if entry.turn_id in live:
                entry.seen_at = read_at
            else:
                entry.flagged = True


def _live_turns(watching: list[Watch]) -> set[Any]:
    """The ids of the watched turns still running, unstopped, with all their leases and a live actor."""
    rows = (
        Turn.objects.filter(
            pk__in=[entry.turn_id for entry in watching], status=Turn.Status.RUNNING, stop_requested_at__isnull=True
        )
        .annotate(
            agent_leases=locks.leases_held(OuterRef("pk")),
            agent_link_live=Exists(
                TelegramLink.objects.filter(pk=OuterRef("telegram_link_id"), revoked_at__isnull=True).order_by()
            ),
        )
        .values_list("pk", "agent_leases", "agent_link_live")
    )
    keys = {entry.session_key for entry in watching if entry.session_key}
    sessions = _live_sessions(keys) if keys else set()
    found = {pk: (leases or 0, link_live) for pk, leases, link_live in rows}
    live = set()
    for entry in watching:
        leases, link_live = found.get(entry.turn_id, (0, False))
        actor_live = link_live if entry.session_key is None else entry.session_key in sessions
        if leases >= entry.leases and actor_live:
            live.add(entry.turn_id)
    return live


def _live_sessions(keys: set[str]) -> set[str]:
    from django.contrib.sessions.models import Session  # only where the site keeps its sessions in SQL

    live = Session.objects.filter(session_key__in=keys, expire_date__gt=Now())
    return set(live.values_list("session_key", flat=True))


watcher = Watcher()
"""The one of this process."""

os.register_at_fork(after_in_child=watcher._begin)  # a prefork worker's child starts its own
