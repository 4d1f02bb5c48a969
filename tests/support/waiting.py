"""Polling for what another thread or process does, and a free loopback port for a server of a test's own."""

from __future__ import annotations

import socket
import time
from typing import Any, Callable


def wait_until(
    condition: Callable[[], Any],
    timeout: float = 10,
    what: str = "condition",
    every: float = 0.05,
    why: Callable[[], str] | None = None,
) -> Any:
    """The condition's first true value, polled every ``every`` seconds until ``timeout`` seconds have passed.

    ``why`` describes the state for the failure's message.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}" + (f": {why()}" if why else ""))
        time.sleep(every)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
