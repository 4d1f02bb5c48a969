"""A site served by another process, reached only from outside, as a browser reaches it.

The demo's test and the fresh-site test start a site from its own command line,
then sign in through its login page and drive the chat page's JSON API with the
CSRF cookie, and its websocket with the session cookie and an allowed Origin,
as the page's script does.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable

from tests.support.waiting import free_port, wait_until  # noqa: F401  (the live-site tests' names)


def log_tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    """Wait until ``port`` accepts connections; fail at once, with the log, if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{process.args!r} exited with {process.returncode}:\n{log_tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on port {port} after {timeout} s:\n{log_tail(log)}")


def start(args: list[str], *, log: Path, **popen: Any) -> subprocess.Popen[bytes]:
    """Start a server in its own process group, its output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **popen)


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """Stop a process started by ``start`` and everything it started (a prefork worker's children too)."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


class Visitor:
    """One browser's cookies: pages, the login form, and the JSON API with the CSRF header."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.cookies if c.name == name), None)

    def request(
        self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str, str]:
        """Status, body and final URL (after redirects); an HTTP error is a status, not an exception."""
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode(), response.url
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace"), error.url

    def get(self, path: str) -> tuple[int, str]:
        status, body, _url = self.request(path)
        return status, body

    def login(self, path: str, username: str, password: str) -> str:
        """Sign in through the site's login page; the URL it lands on."""
        status, page, _url = self.request(path)
        assert status == 200, f"the login page answered {status}:\n{page[:2000]}"
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, "the login page has no CSRF token"
        form = urllib.parse.urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)}
        ).encode()
        status, page, landed = self.request(path, form, {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 200 and self.cookie("sessionid"), f"signing in failed ({status}, {landed}):\n{page[:2000]}"
        return landed

    def api(self, path: str, payload: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """GET, or POST ``payload`` as JSON with the CSRF cookie's token, as the page's script does."""
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers |= {"Content-Type": "application/json", "X-CSRFToken": self.cookie("csrftoken") or ""}
        status, body, _url = self.request(path, data, headers)
        try:
            return status, json.loads(body)
        except ValueError:
            raise AssertionError(f"{path} answered {status} with no JSON:\n{body[:2000]}") from None

    def websocket(self, path: str) -> Any:
        """The page's websocket, with this visitor's session cookie and the site's own Origin."""
        from websockets.sync.client import connect

        url = "ws" + self.base_url.removeprefix("http") + path
        cookie = "; ".join(f"{c.name}={c.value}" for c in self.cookies)
        return connect(
            url, additional_headers={"Cookie": cookie}, origin=self.base_url, open_timeout=15, close_timeout=5
        )


def next_frame(ws: Any, timeout: float = 30) -> dict[str, Any]:
    """The next frame of a ``Visitor.websocket``, as JSON."""
    return json.loads(ws.recv(timeout=timeout))


def frames_until(ws: Any, wanted: Callable[[dict[str, Any]], Any], timeout: float = 90) -> list[dict[str, Any]]:
    """Every frame up to and including the first ``wanted`` one."""
    deadline = time.monotonic() + timeout
    frames: list[dict[str, Any]] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"the wanted frame did not come in {timeout} s; came: {frames}")
        try:
            frames.append(next_frame(ws, timeout=left))
        except TimeoutError:
            continue
        if wanted(frames[-1]):
            return frames
