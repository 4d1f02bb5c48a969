"""Calls released together in threads, each on its own database connection."""

from __future__ import annotations

import threading
from typing import Any, Callable

from django.db import connection


def at_once(*calls: Callable[[], Any]) -> list[tuple[str, Any]]:
    """Run the calls in threads released together; each outcome is ("ok", value) or ("error", exc)."""
    barrier = threading.Barrier(len(calls))
    outcomes: list[tuple[str, Any]] = [("error", None)] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=10)
            outcomes[i] = ("ok", call())
        except Exception as exc:  # the outcome is what the test looks at
            outcomes[i] = ("error", exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not any(t.is_alive() for t in threads), "a racing call hung"
    return outcomes


def waiting_on_locks() -> int:
    """How many other sessions of the test database wait on a lock now (one a racing call met)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])
