"""Tools that tests declare for themselves, removed again when the test ends."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from agent.access import authorize_session
from agent.tools import agent_tool, registry


@pytest.fixture
def declare() -> Iterator[Callable[..., Any]]:
    """``declare(func, name=..., ...)``: register a tool for this test only."""
    names: list[str] = []

    def register(func: Callable[..., Any], **declaration: Any) -> Any:
        declaration.setdefault("description", "A tool of the tests.")
        declared = agent_tool(**declaration)(func)
        names.append(declaration["name"])  # only now: a refused declaration must not remove a site's tool
        return declared

    yield register
    for name in names:
        registry.unregister(name)


@pytest.fixture
def scope(ref: Any) -> Any:
    return authorize_session(ref, impersonated=False)
