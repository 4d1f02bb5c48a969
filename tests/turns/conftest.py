"""A read tool that counts its runs, for the turn loop's tests."""

from __future__ import annotations

from typing import Any, Callable

import pytest


@pytest.fixture
def counter(declare: Callable[..., Any]) -> list[dict[str, Any]]:
    """A read tool ``count_me`` (no permission needed) that records each run."""
    runs: list[dict[str, Any]] = []

    def count_me(ctx: Any, **args: Any) -> dict[str, Any]:
        runs.append(args)
        return {"count": len(runs)}

    declare(count_me, name="count_me", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    return runs
