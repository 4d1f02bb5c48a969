"""The answer while the model writes it: drafts to the chat's tabs, checks between chunks.

A draft is not stored while it streams. The tabs get the text so far at most
once per ``STREAM_INTERVAL_MS``: the first chunk's at once, the rest as the
interval allows, the last of a burst when the interval ends. The stored
answer, or the turn's end, replaces the draft in the page; a stop or the
deadline stores ``Draft.text`` (what the tabs may see) as a partial answer.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol

from ..ai import off_purpose
from ..core import events, pooled
from ..core.conf import agent_settings
from ..core.ids import ConversationId, MessageId, TurnId
from .watcher import FULL_CHECK_EVERY_S, Watch, watcher

CHECK_EVERY_S = 0.5
"""How often a streaming round checks its turn (stop, deadline, leases, session): a stop halts it within a second."""


class Clock(Protocol):
    """The time a draft reads, and how it runs a send later (a test passes one it moves by hand)."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> None: ...


class _EventsClock:
    """Monotonic time; a later send runs on the events loop, in order with the process's other sends."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        events.call_later(delay, callback)


REAL_TIME: Clock = _EventsClock()


class Follower(Protocol):
    """A front end other than the page that shows a round's answer while it streams (a Telegram chat)."""

    def show(self, text: str) -> None:
        """The text so far; called on the events loop, so it must not wait for anything."""

    def close(self) -> None:
        """The round's answer is about to be stored (or the round ended): no more ``show``."""


_follow: list[Callable[[Any, Any], Follower | None]] = []


def follow(factory: Callable[[Any, Any], Follower | None]) -> None:
    """Register a front end's ``factory(turn, answer_id)``: a ``Follower`` for the turns it shows, else None."""
    _follow.append(factory)


def followers(turn: Any, answer_id: MessageId) -> list[Follower]:
    """The followers of one round of ``turn``, whose answer will be stored under ``answer_id``."""
    found = (factory(turn, answer_id) for factory in _follow)
    return [follower for follower in found if follower is not None]


class Draft:
    """One round's answer as it streams: called with the text so far after each chunk.

    ``check`` (the runner's step check) runs between chunks at most every
    ``CHECK_EVERY_S`` (for a ``watched`` turn, when the process's watcher says so);
    what it raises ends the model call. Sends happen on the
    events loop, so they keep their order with the stored answer's event; after
    ``close`` none begins. ``clock`` gives the time and runs the send due at an
    interval's end (a test moves its own).
    """

    def __init__(
        self,
        conversation_id: ConversationId,
        turn_id: TurnId,
        round_number: int,
        check: Callable[[], Any],
        followers: list[Follower] | None = None,
        watched: Watch | None = None,
        clock: Clock = REAL_TIME,
    ) -> None:
        self.conversation_id = conversation_id
        self.clock = clock
        self.watched = watched
        self.followers = followers or []
        self.turn_id = turn_id
        self.round = round_number
        self.check = check
        self.interval = agent_settings.STREAM_INTERVAL_MS / 1000
        self.next_check = clock.now() + CHECK_EVERY_S
        self.next_full_check = self.next_check
        self.lock = threading.Lock()
        self.text = ""
        self.sent_text = ""
        self.sent_at = float("-inf")
        self.armed = False  # a send is due when the interval ends
        self.closed = False

    def __call__(self, text: str) -> None:
        now = self.clock.now()
        self._check_when_due(now)
        shown = off_purpose.draft_text(text)
        with self.lock:
            self.text = shown
            if self.armed or self.closed or shown == self.sent_text:
                return
            wait = self.sent_at + self.interval - now
            if wait <= 0:
                self._send()
            else:
                self.armed = True
                self.clock.call_later(wait, self._send_due)

    def watch(self) -> None:
        """The check, when no chunk has run it for ``CHECK_EVERY_S``: the stream's watchdog calls this
        while the model sends nothing, so a stop never waits for the next chunk."""
        self._check_when_due(self.clock.now())

    def _check_when_due(self, now: float) -> None:
        """Run ``check`` at most every ``CHECK_EVERY_S``; for a turn the process's watcher reads, only
        once it flags the turn (then at once), falls behind, or ``FULL_CHECK_EVERY_S`` has passed."""
        watched = self.watched
        if watched is not None and watched.flagged:
            watched.flagged = False  # the next beat flags it again if the check lets it go on
        elif now < self.next_check:
            return
        elif watched is not None and not watched.due(now) and now < self.next_full_check:
            self.next_check = now + CHECK_EVERY_S
            return
        self.check()
        pooled.give_back()  # the rest of the stream holds no database connection
        checked_at = self.clock.now()
        self.next_check = checked_at + CHECK_EVERY_S
        self.next_full_check = checked_at + FULL_CHECK_EVERY_S

    def close(self) -> None:
        """No draft is sent from now on: the answer is about to be stored, or the round ended."""
        with self.lock:
            self.closed = True
        if self.watched is not None:
            watcher.unwatch(self.watched)
        for follower in self.followers:
            follower.close()

    def _send_due(self) -> None:
        with self.lock:
            self.armed = False
            if not self.closed and self.text != self.sent_text:
                self._send()

    def _send(self) -> None:
        """Send the text so far (the lock held)."""
        self.sent_at = self.clock.now()
        self.sent_text = self.text
        events.answer_delta(self.conversation_id, self.turn_id, self.round, self.text)
        for follower in self.followers:
            follower.show(self.text)
