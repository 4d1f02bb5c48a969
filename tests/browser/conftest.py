"""The chat page in headless Chromium, against the real stack.

daphne serves ``tests.asgi`` in a subprocess on the test database, a
Celery worker runs turns in this process (threads pool, this run's queue),
and the scripted model server answers. Everything is module-scoped except the
browser context, so a test costs about a turn, not a start-up.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class AsgiServer:
    """daphne in a subprocess; ``stop()`` then ``start()`` drops every websocket, as a restart does."""

    def __init__(self, database_name: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        db = connection.settings_dict
        self.env = os.environ | {
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{database_name}",
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        log = open(ARTIFACTS / "daphne.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "tests.browser.asgi:application"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}; see {ARTIFACTS / 'daphne.log'}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("daphne did not start listening in 30 s")

    def stop(self) -> None:
        """Kill it, as a crash would: a graceful stop waits 10 s for open websockets."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def asgi_server(django_db_setup: Any) -> Iterator[AsgiServer]:
    server = AsgiServer(connection.settings_dict["NAME"])  # the test database, after its setup
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def turn_worker(django_db_setup: Any) -> Iterator[Any]:
    from celery.contrib.testing.worker import start_worker

    from tests.celery_app import app

    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=[settings.CELERY_TASK_DEFAULT_QUEUE],
        loglevel="WARNING",
    ) as worker:
        yield worker


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=15_000)  # a loaded machine and a cold worker; a pass is still quick

    # Playwright's sync API runs an event loop in this thread; the tests' own ORM calls are still sync.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def browser_context(request: Any, chromium: Any, asgi_server: AsgiServer, turn_worker: Any) -> Iterator[Any]:
    """A fresh browser profile; on failure every open tab is saved as a screenshot.

    Afterwards, any CSP violation or uncaught script error fails the test.
    """
    context = chromium.new_context(base_url=asgi_server.url, locale="en-US", viewport={"width": 1100, "height": 800})
    context.set_default_timeout(10_000)
    broken: list[str] = []
    context.on("weberror", lambda error: broken.append(f"uncaught: {error.error}"))
    context.on("console", lambda message: "Content Security Policy" in message.text and broken.append(message.text))
    yield context
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        for number, tab in enumerate(context.pages):
            tab.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{number}.png"), full_page=True)
    context.close()
    assert broken == [], "the page broke its policy or threw"


@pytest.fixture
def tab(browser_context: Any) -> Any:
    return browser_context.new_page()
