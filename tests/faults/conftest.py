"""Fixtures of the fault suite: one stack of real processes per test module, tabs, and the measured figures.

A module sets ``AGENT_SETTINGS = {...}`` for the ``AGENT`` keys its processes
share; modules with the same settings share one stack. The figures each test measures are printed at the end of the run
(``pytest_terminal_summary``), so the suite's own output carries them.
"""

from __future__ import annotations

import shutil
from typing import Any, Callable, Iterator

import pytest

from agent.models import Endpoint
from tests.support.harness import Stack, Stacks, Tab, run_artifacts

FIGURES: list[str] = []


@pytest.fixture(scope="session", autouse=True)
def _fresh_artifacts() -> None:
    """Each run's logs only: the previous run's (on the same queue) are removed at the start."""
    shutil.rmtree(run_artifacts(), ignore_errors=True)
    run_artifacts().mkdir(parents=True)


@pytest.fixture(scope="session")
def stacks(django_db_setup: Any) -> Iterator[Stacks]:
    """The run's stacks; every process is killed when the run ends."""
    made = Stacks()
    try:
        yield made
    finally:
        made.stop_all()


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest, stacks: Stacks) -> Iterator[Stack]:
    """The module's daphne, worker and beat (``AGENT_SETTINGS`` of the module); each test starts those it needs.

    They stop with the module, so no worker of theirs takes turns off the test queue in later modules.
    """
    agent = getattr(request.module, "AGENT_SETTINGS", {})
    name = "-".join(f"{key}={value}" for key, value in sorted(agent.items())) or "production-settings"
    site = stacks.use(name, agent=agent)
    yield site
    site.stop_all()


@pytest.fixture
def tabs(stack: Stack) -> Iterator[Callable[..., Tab]]:
    """``tabs(session_key)``: an open tab of that session; all are closed when the test ends."""
    opened: list[Tab] = []

    def open_tab(session_key: str) -> Tab:
        tab = Tab(stack, session_key)
        opened.append(tab)
        return tab.open()

    yield open_tab
    for tab in opened:
        tab.close()


@pytest.fixture
def slow_endpoint(endpoint: Endpoint) -> Endpoint:
    """The scripted endpoint with a timeout that outlasts a frozen worker."""
    endpoint.timeout_s = 60
    endpoint.save()
    return endpoint


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, float], None]:
    """``figure("crash -> tabs told", 12.3)``: print a measured figure and keep it for the run's summary."""

    def record(what: str, seconds: float) -> None:
        line = f"{request.node.name}: {what}: {seconds:.2f} s"
        FIGURES.append(line)
        print(line)

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.section("fault suite figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
