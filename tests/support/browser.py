"""The chat page's server for the browser tests (daphne in a subprocess), and what a user does on the page."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from django.db import connection
from playwright.sync_api import Page, expect

from .waiting import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "browser" / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class AsgiServer:
    """daphne in a subprocess; ``stop()`` then ``start()`` drops every websocket, as a restart does."""

    def __init__(self, database_name: str) -> None:
        self.port = free_port()
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

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Kill it, as a crash would: a graceful stop waits 10 s for open websockets."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def sign_in(tab: Page, user: Any, path: str = "/assistant/") -> None:
    """Through the login form, then wait for the page's socket."""
    tab.goto(f"/accounts/login/?next={path}")
    tab.fill("#id_username", user.username)
    tab.fill("#id_password", "pw-for-tests")
    tab.click(".login-form button[type=submit]")
    expect(tab.locator("#agent-app")).to_be_visible()
    expect(tab.locator("#connection")).to_be_hidden()


def send(tab: Page, text: str) -> None:
    tab.fill("#composer-text", text)
    tab.press("#composer-text", "Enter")


def paste(tab: Page, text: str) -> None:
    """A paste into the message box, as the browser fires it (the page may take it as a file instead)."""
    tab.locator("#composer-text").focus()
    tab.evaluate(
        """(text) => {
            const data = new DataTransfer();
            data.setData("text/plain", text);
            const event = new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true});
            const box = document.getElementById("composer-text");
            if (box.dispatchEvent(event)) {
                box.setRangeText(text, box.selectionStart, box.selectionEnd, "end");
                box.dispatchEvent(new Event("input", {bubbles: true}));
            }
        }""",
        text,
    )


@contextmanager
def chromium_browser(*extra_args: str) -> Iterator[Any]:
    """Debian's Chromium, headless, with the tests' flags and ``extra_args``.

    Playwright's sync API runs an event loop in this thread; the tests' own ORM calls are still sync.
    """
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            args = [*CHROMIUM_ARGS, *extra_args]
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=args, headless=True)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
