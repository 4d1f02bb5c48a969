"""Where a user stands against one limit: the one value every cap, quota and rate reports, to the
panel and in a refusal. Apart so that the quotas and the rolling caps share it without importing
each other."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

Amount = TypeVar("Amount", int, Decimal)
"""Counts and bytes are whole; money is a ``Decimal``."""


@dataclass(frozen=True)
class Standing(Generic[Amount]):
    """One limit: its cap (0: none), what is used now, and when enough of its window passes to
    bring the use under the cap again (None: not reached, or it frees when a turn ends)."""

    limit: str
    cap: Amount
    used: Amount
    frees_at: datetime | None = None

    @property
    def reached(self) -> bool:
        return bool(self.cap) and self.used >= self.cap

    def params(self, *, numbers: bool = False) -> dict[str, Any]:
        """Plain JSON, for a refusal and the API; the time in ISO 8601. Amounts are strings (money
        does not fit a JSON number), or with ``numbers`` as they are: the quotas count whole things."""
        return {
            "limit": self.limit,
            "cap": self.cap if numbers else str(self.cap),
            "used": self.used if numbers else str(self.used),
            "frees_at": self.frees_at.isoformat() if self.frees_at else None,
        }
