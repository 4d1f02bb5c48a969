"""A clock a test moves by hand, for the parts that take one (a draft's interval and checks)."""

from __future__ import annotations

from typing import Callable


class ManualClock:
    """Time that passes only in ``advance``; a call asked for later runs there, once its time has come."""

    def __init__(self) -> None:
        self.at = 0.0
        self.later: list[tuple[float, Callable[[], None]]] = []

    def now(self) -> float:
        return self.at

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.later.append((self.at + delay, callback))

    def advance(self, seconds: float) -> None:
        self.at += seconds
        due = sorted((entry for entry in self.later if entry[0] <= self.at + 1e-9), key=lambda entry: entry[0])
        self.later = [entry for entry in self.later if entry[0] > self.at + 1e-9]
        for _when, callback in due:
            callback()
