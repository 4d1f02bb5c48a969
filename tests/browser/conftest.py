"""The chat page in headless Chromium, against the real stack.

daphne serves ``tests.asgi`` in a subprocess on the test database, a
Celery worker runs turns in this process (threads pool, this run's queue),
and the scripted model server answers. One daphne per site settings serves
the whole session, Chromium and the worker one module, and the browser
context one test, so a test costs about a turn, not a start-up.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from django.db import connection

from tests.support.browser import ARTIFACTS, AsgiServer, chromium_browser
from tests.support.waiting import wait_until


@pytest.fixture(scope="session")
def _asgi_servers(django_db_setup: Any) -> Iterator[dict[str, AsgiServer]]:
    """The session's daphnes, one per site settings, each started when a module first asks for it."""
    servers: dict[str, AsgiServer] = {}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="module")
def asgi_server(request: Any, _asgi_servers: dict[str, AsgiServer]) -> AsgiServer:
    """daphne on the test database, after its setup; a module's ``SITE_AGENT_SETTINGS`` are its site's.

    A module that stopped its server (a restart it tests) gets it running again."""
    own = json.dumps(getattr(request.module, "SITE_AGENT_SETTINGS", None) or {}, sort_keys=True)
    server = _asgi_servers.get(own)
    if server is None:
        server = _asgi_servers[own] = AsgiServer(connection.settings_dict["NAME"])
        if own != "{}":
            server.env["AGENT_TEST_SETTINGS"] = own
    if not server.running():
        server.start()
    return server


@pytest.fixture(scope="module")  # not the session's: Playwright's loop would stay in this thread for later tests
def chromium() -> Iterator[Any]:
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)  # a loaded machine and a cold worker; a pass is still quick
    with chromium_browser() as browser:
        yield browser


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(autouse=True)
def _no_turn_left_running(transactional_db: Any) -> Iterator[None]:
    """A test that ends while a turn runs (its page only had to show it running) asks the turn to stop
    and waits for its end, so the module's worker writes nothing while the database is emptied; a turn
    still queued (a module without a worker) is ended here."""
    yield
    from agent.models import Turn
    from agent.turns import monitor

    for turn in Turn.objects.filter(status=Turn.Status.QUEUED):
        monitor.end_turn(turn, Turn.Status.STOPPED)
    running = Turn.objects.filter(status=Turn.Status.RUNNING)
    for pk in running.values_list("pk", flat=True):
        monitor.request_stop(pk)
    wait_until(lambda: not running.exists(), timeout=30, what="the test's running turns to end")
    _let_the_server_finish()


SERVER_QUIET_S = 5
"""How long the database's emptying waits for the requests a closed page left at the server."""


def _let_the_server_finish() -> None:
    """Wait (a while, no longer) until no other session of the test database runs a statement or holds a
    transaction: a request the closed page left at daphne, reading while the tables are emptied, would
    deadlock with the emptying's TRUNCATE."""
    deadline = time.monotonic() + SERVER_QUIET_S
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'"
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)


@pytest.fixture
def browser_context(request: Any, chromium: Any, asgi_server: AsgiServer, worker: Any) -> Iterator[Any]:
    """A fresh browser profile; on failure every open tab is saved as a screenshot.

    Afterwards, any CSP violation or uncaught script error fails the test.
    """
    context = chromium.new_context(base_url=asgi_server.url, locale="en-US", viewport={"width": 1100, "height": 800})
    context.set_default_timeout(10_000)
    broken: list[str] = []
    context.on("weberror", lambda error: broken.append(f"uncaught: {error.error}"))
    context.on("console", lambda message: "Content Security Policy" in message.text and broken.append(message.text))
    answering = _requests_in_flight(context)
    yield context
    _let_the_requests_end(context, answering)
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        for number, tab in enumerate(context.pages):
            tab.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{number}.png"), full_page=True)
    context.close()
    assert broken == [], "the page broke its policy or threw"


REQUESTS_END_S = 5
"""How long a test's end waits for the page's requests to be answered before its tabs close."""


def _requests_in_flight(context: Any) -> set[Any]:
    """The context's requests sent and not yet answered; an event stream's request lasts as long as its
    stream, so it is not one of them."""
    answering: set[Any] = set()

    def sent(request: Any) -> None:
        if request.resource_type != "eventsource":
            answering.add(request)

    def ended(request: Any) -> None:
        answering.discard(request)

    context.on("request", sent)
    context.on("requestfinished", ended)
    context.on("requestfailed", ended)
    return answering


def _let_the_requests_end(context: Any, answering: set[Any]) -> None:
    """A request answered is one whose view has returned and committed; a tab closed with one still at
    the server (an upload the test did not wait for) leaves daphne writing while the tables are emptied,
    and the emptying's TRUNCATE deadlocks with it."""
    pages = [page for page in context.pages if not page.is_closed()]
    deadline = time.monotonic() + REQUESTS_END_S
    while pages and answering and time.monotonic() < deadline:
        pages[0].wait_for_timeout(50)  # Playwright hands this thread its events while it waits


@pytest.fixture
def tab(browser_context: Any) -> Any:
    return browser_context.new_page()


NPM_PREFIX = Path(__file__).parent
"""Where ``package.json`` pins what the tests inject into the page (``npm ci --prefix tests/browser``)."""


@pytest.fixture(scope="session")
def axe_source() -> str:
    """axe-core's script, as npm installed it from the pinned lock file (installed here when ``.ci/run`` has not);
    the test is skipped only where npm itself is missing or the registry cannot be reached."""
    script = NPM_PREFIX / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: axe-core cannot be installed")
        done = subprocess.run(
            [npm, "ci", "--prefix", str(NPM_PREFIX), "--no-audit", "--no-fund", "--ignore-scripts"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 or not script.exists():
            pytest.skip(f"npm could not install axe-core: {done.stderr[-500:]}")
    return script.read_text()
