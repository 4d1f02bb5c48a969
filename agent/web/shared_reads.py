"""What one process's open tabs share when they take a chat's events: scope checks and message reads.

A tab (a websocket, an event stream over HTTP) gets content only under a
scope checked at most ``SCOPE_FRESH_S`` ago. The tabs of one process share
that work: one check per session and one read of a message per user, however
many tabs are open, and what they ask of the database at one moment goes to
it in one call.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Awaitable, Callable

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils import translation

from .. import conversations
from ..access import Scope, SessionRef, authorize_session
from .rendering import page_view

SCOPE_FRESH_S = 1.0
"""A tab gets content only under a scope checked at most this long ago."""


class FreshnessClock:
    """The monotonic clock the age of a check or a read is judged on, one per process. A test moves it on
    (``skip``) instead of sleeping until what was checked is older than ``SCOPE_FRESH_S``."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def now(self) -> float:
        return time.monotonic() + self.skipped

    def skip(self, seconds: float) -> None:
        self.skipped += seconds


CLOCK = FreshnessClock()

TIDY_S = 1.0
"""How often the shared reads let Django close an old or broken connection and check a kept one."""


class SharedView:
    """One read of a message for a process's sockets of its user, and its frame per language."""

    def __init__(self, read: asyncio.Future[dict[str, Any]]) -> None:
        self.read = read
        self.done_at: float | None = None
        self.view: dict[str, Any] = {}
        self.frames: dict[str, str] = {}
        read.add_done_callback(self._done)

    def _done(self, read: asyncio.Future[dict[str, Any]]) -> None:
        self.done_at = CLOCK.now()
        if not read.cancelled() and read.exception() is None:
            self.view = read.result()

    @property
    def seq(self) -> int:
        return int(self.view["seq"])

    def frame(self, language: str) -> str:
        """The ``message`` frame as sent, rendered once per language (a notice's text is translated)."""
        if language not in self.frames:
            with translation.override(language):
                self.frames[language] = json.dumps({"type": "message", "message": page_view(self.view)})
        return self.frames[language]


class SharedReads:
    """What one process's sockets share, per event loop: scope checks by session, message reads by user.

    An entry serves only while it is at most ``SCOPE_FRESH_S`` old, so no
    socket learns through it what a fresh check would refuse. Reads asked for
    while the database thread is busy wait and then go to it in one call.
    """

    _by_loop: dict[asyncio.AbstractEventLoop, "SharedReads"] = {}

    def __init__(self) -> None:
        self.checks: dict[tuple[str, Any, bool], tuple[float, asyncio.Future[Scope]]] = {}
        self.views: dict[tuple[Any, str, str], SharedView] = {}
        self.revocations: dict[str, float] = {}
        self.pruned = CLOCK.now()
        self.waiting: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self.calling: asyncio.Task[None] | None = None
        self.tidied = 0.0
        self.database_failed = False

    @classmethod
    def of_running_loop(cls) -> "SharedReads":
        loop = asyncio.get_running_loop()
        shared = cls._by_loop.get(loop)
        if shared is None:
            for old in [old for old in cls._by_loop if old.is_closed()]:
                del cls._by_loop[old]
            shared = cls._by_loop[loop] = cls()
        return shared

    async def scope(self, actor: SessionRef, impersonated: bool, *, since: float) -> Scope:
        """A check of ``actor``'s session begun at or after ``since``: the one in flight or a new one."""
        key = (actor.session_key, actor.user_id, impersonated)
        entry = self.checks.get(key)
        if entry is None or entry[0] < since:
            check = self._in_next_call(lambda: authorize_session(actor, impersonated=impersonated))
            entry = self.checks[key] = (CLOCK.now(), check)
            self._prune()
        return await asyncio.shield(entry[1])  # a socket that closes meanwhile must not cancel the others' check

    async def message(self, scope: Scope, conversation_id: str, message_id: str) -> SharedView:
        """The message as its user's tabs see it, read once for them all."""
        key = (scope.user_id, conversation_id, message_id)
        shared = self.views.get(key)
        if shared is None or (shared.done_at is not None and CLOCK.now() - shared.done_at > SCOPE_FRESH_S):
            read = self._in_next_call(lambda: conversations.message_view(scope, conversation_id, message_id))
            shared = self.views[key] = SharedView(read)
            self._prune()
        await asyncio.shield(shared.read)
        return shared

    def first_seen(self, revocation: str | None) -> float:
        """When this process first heard of a revocation: a check begun since then sees it."""
        now = CLOCK.now()
        if not revocation:
            return now
        return self.revocations.setdefault(revocation, now)

    def _in_next_call(self, work: Callable[[], Any]) -> asyncio.Future[Any]:
        """``work``'s outcome, from the database thread's next call, shared with what else waits for it."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self.waiting.append((work, future))
        if self.calling is None:
            self.calling = asyncio.ensure_future(self._call_database())
        return future

    async def _call_database(self) -> None:
        batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        try:
            while self.waiting:
                batch, self.waiting = self.waiting, []
                # Tidy the connection (CONN_MAX_AGE, CONN_HEALTH_CHECKS) at most once a second and after
                # a database error, not in every call: a health check per event costs as much as the read.
                tidy = time.monotonic() - self.tidied > TIDY_S or self.database_failed
                call = database_sync_to_async(_each) if tidy else sync_to_async(_each, thread_sensitive=True)
                self.tidied = time.monotonic() if tidy else self.tidied
                try:
                    outcomes = await call([work for work, _future in batch])
                except Exception as error:  # the call itself failed: each waiter hears it
                    outcomes = [(False, error)] * len(batch)
                self.database_failed = any(not ok and isinstance(value, DatabaseError) for ok, value in outcomes)
                for (_work, future), (ok, value) in zip(batch, outcomes, strict=True):
                    if future.done():
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        except asyncio.CancelledError:  # the loop is closing
            for _work, future in batch + self.waiting:
                future.cancel()
            self.waiting = []
            raise
        finally:
            self.calling = None

    def _prune(self) -> None:
        now = CLOCK.now()
        if now - self.pruned < SCOPE_FRESH_S:
            return
        self.pruned = now
        horizon = now - 2 * SCOPE_FRESH_S
        self.checks = {k: v for k, v in self.checks.items() if v[0] >= horizon or not v[1].done()}
        self.views = {k: v for k, v in self.views.items() if v.done_at is None or v.done_at >= horizon}
        self.revocations = {k: t for k, t in self.revocations.items() if t >= now - 60}


def same_draft(queued: dict[str, Any], event: dict[str, Any]) -> bool:
    return queued["type"] == event["type"] and all(queued[k] == event[k] for k in ("conversation", "turn", "round"))


def _each(works: list[Callable[[], Any]]) -> list[tuple[bool, Any]]:
    """Run each piece of work on the database thread; one's refusal or error is its own."""
    outcomes: list[tuple[bool, Any]] = []
    for work in works:
        try:
            outcomes.append((True, work()))
        except Exception as error:
            outcomes.append((False, error))
    return outcomes


def _retrieved(future: asyncio.Future[Any]) -> None:
    """A shared read whose sockets all closed meanwhile is not an error left unread."""
    if not future.cancelled():
        future.exception()


_background: set[asyncio.Future[Any]] = set()


def run_detached(work: Awaitable[Any]) -> asyncio.Future[Any]:
    """Run ``work`` to its end even if whoever started it is cancelled."""
    task = asyncio.ensure_future(work)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task
