"""The product run as production runs it: daphne, prefork Celery workers, beat and Redis, each a real process.

Every process starts in its own process group, writes its output to a file
under ``tests/faults/artifacts/``, and is killed with its whole group when its
test module ends, whatever happened. Tabs are real websocket clients over TCP
with a signed-in session's cookie, and keep their messages as the chat page
does (by id, resyncing with ``after=<last id>`` when they reconnect).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from django.conf import settings
from django.db import connection
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection, connect

from agent.core.conf import agent_settings
from tests.support.waiting import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "faults" / "artifacts"
START_TIMEOUT_S = 60  # a cold start on two busy cores
# What most fault tests run with, the same in every process of their stack: a lease that runs out in 6 s
# (renewed every 2 s), sockets that check their session every 3 s, a queued turn requeued after 5 s.
WORKER_POOLS = {
    "threads": ["-P", "threads", "-c", "100"],  # the README's worker
    "prefork": ["-P", "prefork", "-c", "2", "-O", "fair"],
}
WORKER_POOL = os.environ.get("AGENT_TEST_WORKER_POOL", "threads")
"""The workers' pool: ``AGENT_TEST_WORKER_POOL=prefork`` runs the suite on prefork children instead."""
QUICK_SETTINGS = {"LOCK_LEASE_S": 6, "LOCK_RENEW_S": 2, "SOCKET_RECHECK_S": 3, "QUEUED_REQUEUE_S": 5}
CLOSE_SESSION_ENDED = 4401


def run_artifacts() -> Path:
    """This run's logs: one folder per test queue, so suites run side by side in one tree keep theirs."""
    return ARTIFACTS / agent_settings.TASK_QUEUE


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def answering(port: int) -> bool:
    """The site answers a page over HTTP, as a load balancer's health check asks before sending users:
    its URLs are loaded then (a first request pays for importing them), not during a test's timing."""
    if not listening(port):
        return False
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/accounts/login/", timeout=30) as response:
            return int(response.status) == 200
    except OSError:
        return False


class Process:
    """One program in a process group of its own, its output appended to ``log``."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        log: Path,
        ready: Callable[["Process"], bool],
        cwd: Path = ROOT,
    ) -> None:
        self.name, self.argv, self.env, self.log, self._ready, self.cwd = name, argv, env, log, ready, cwd
        self.popen: subprocess.Popen[bytes] | None = None
        self.log_offset = 0

    def start(self) -> "Process":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.log_offset = out.tell()
            out.write(f"--- start {' '.join(self.argv[1:5])} ...\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> "Process":
        deadline = time.monotonic() + timeout
        while not self._ready(self):
            if not self.alive:
                raise RuntimeError(f"{self.name} exited with {self.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} was not ready after {timeout} s:\n{self.tail()}")
            time.sleep(0.1)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def output(self) -> str:
        """What the process wrote since its last start."""
        with open(self.log, "rb") as log:
            log.seek(self.log_offset)
            return log.read().decode(errors="replace")

    def tail(self, chars: int = 3000) -> str:
        return self.output()[-chars:]

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the whole group (continued first, in case a test stopped it), and reap."""
        if self.popen is None:
            return
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGKILL)
        self.popen.wait(timeout=30)


def _log_says(text: str) -> Callable[[Process], bool]:
    return lambda process: text in process.output()


class RedisServer:
    """A private ``redis-server`` on a free port, no persistence: a restart comes back empty."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: Process | None = None

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> "RedisServer":
        argv = [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
        ]
        self.process = (
            Process(
                f"redis-{self.port}",
                argv,
                dict(os.environ),
                self.directory / f"redis-{self.port}.log",
                lambda p: listening(self.port),
            )
            .start()
            .wait_ready()
        )
        return self

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    def __enter__(self) -> "RedisServer":
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill()


class Stack:
    """The test site's processes on the test database: ``daphne``, ``worker`` (the README's, or
    ``WORKER_POOL``'s), a ``spare-worker`` (for a test that freezes the first), ``beat``.

    ``agent`` overrides keys of ``settings.AGENT`` in every process of the stack
    (through ``tests.faults.settings``), so the worker, beat and daphne agree.
    A stack that stands for one host of several gets its own ``settings``
    module, worker ``queue``, working directory (``cwd``) and ``env`` additions.
    """

    def __init__(
        self,
        name: str,
        *,
        agent: dict[str, Any] | None = None,
        redis_url: str | None = None,
        broker_url: str | None = None,
        settings_module: str = "tests.faults.settings",
        queue: str | None = None,
        cwd: Path = ROOT,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.directory = run_artifacts() / name
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.queue = queue or agent_settings.TASK_QUEUE
        self.broker_url = broker_url or settings.CELERY_BROKER_URL
        self.agent = dict(agent or {})
        self.cwd = cwd
        db = connection.settings_dict
        self.env = os.environ | {
            "DJANGO_SETTINGS_MODULE": settings_module,
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
            "CELERY_BROKER_URL": self.broker_url,
            "AGENT_TEST_QUEUE": self.queue,
            "AGENT_FAULTS_SETTINGS": json.dumps(self.agent),
            "PYTHONUNBUFFERED": "1",
            # the test site imports from this tree wherever the process runs
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        }
        if redis_url:
            self.env["REDIS_URL"] = redis_url
        self.env.update(env or {})
        self.processes: dict[str, Process] = {}
        self.worker_node = ""

    # -- processes ---------------------------------------------------------------------

    def _new(self, name: str) -> Process:
        python = [sys.executable, "-m"]
        log = self.directory / f"{name}.log"
        if name == "daphne":
            argv = [*python, "daphne", "-b", "127.0.0.1", "-p", str(self.port), "tests.asgi:application"]
            return Process(name, argv, self.env, log, lambda p: answering(self.port), self.cwd)
        if name in ("worker", "spare-worker"):
            node = f"faults-{uuid.uuid4().hex[:8]}@127.0.0.1"
            if name == "worker":
                self.worker_node = node
            argv = [
                *python,
                "celery",
                "-A",
                "tests.celery_app",
                "worker",
                *WORKER_POOLS[WORKER_POOL],
                "-Q",
                self.queue,
                "-n",
                node,
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
            ]
            return Process(name, argv, self.env, log, _log_says(f"{node} ready."), self.cwd)
        if name == "beat":
            argv = [
                *python,
                "celery",
                "-A",
                "tests.celery_app",
                "beat",
                "-l",
                "INFO",
                "-s",
                str(self.directory / "beat-schedule"),
            ]
            return Process(name, argv, self.env, log, _log_says("beat: Starting..."), self.cwd)
        raise ValueError(name)

    def start(self, *names: str) -> "Stack":
        """Start those of ``names`` that are not running (all at once), and wait until each is ready."""
        self.directory.mkdir(parents=True, exist_ok=True)
        started = []
        for name in names:
            process = self.processes.get(name)
            if process is None or not process.alive:
                if process is not None:
                    process.kill()
                self.processes[name] = process = self._new(name).start()
                started.append(process)
        for process in started:
            process.wait_ready()
        return self

    def __getitem__(self, name: str) -> Process:
        return self.processes[name]

    def kill(self, name: str) -> None:
        """SIGKILL a process's whole group, as a crashed host or an OOM kill would."""
        self.processes[name].kill()

    def stop_all(self) -> None:
        for process in self.processes.values():
            process.kill()

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_all()

    # -- the broker ----------------------------------------------------------------------

    def pool_child(self, turn_id: Any, timeout: float = 15) -> int:
        """The pid of the process that runs this turn: the prefork pool's child, or a worker of threads
        itself (from the worker's own ``inspect active``)."""
        from tests.celery_app import app

        def find() -> int | None:
            with app.connection_for_write(self.broker_url) as conn:
                active = app.control.inspect([self.worker_node], timeout=2, connection=conn).active() or {}
            for task in active.get(self.worker_node, []):
                if str(turn_id) in str(task.get("args")):
                    return int(task["worker_pid"])
            return None

        return wait_until(find, timeout, f"the worker to report turn {turn_id} active", every=0.2)

    def runs(self, turn_id: Any) -> bool:
        """Whether the worker reports a task of this turn as active."""
        from tests.celery_app import app

        with app.connection_for_write(self.broker_url) as conn:
            active = app.control.inspect([self.worker_node], timeout=2, connection=conn).active()
        if active is None:
            raise AssertionError(f"the worker did not answer inspect:\n{self['worker'].tail()}")
        return any(str(turn_id) in str(task.get("args")) for task in active.get(self.worker_node, []))

    def purge_queue(self) -> int:
        """Drop every message waiting in the turn queue, as a broker that lost its data would."""
        from tests.celery_app import app

        with app.connection_for_write(self.broker_url) as conn:
            return int(conn.default_channel.queue_purge(self.queue) or 0)

    # -- HTTP ----------------------------------------------------------------------------

    def post_logout(self, session_key: str) -> int:
        """Sign out through the site's own logout view, as the browser's form does (CSRF included)."""
        token = secrets.token_hex(16)  # 32 characters: a valid unmasked CSRF secret
        request = urllib.request.Request(
            f"{self.base_url}/accounts/logout/",
            data=b"",
            method="POST",
            headers={
                "Cookie": f"{settings.SESSION_COOKIE_NAME}={session_key}; {settings.CSRF_COOKIE_NAME}={token}",
                "X-CSRFToken": token,
                "Origin": self.base_url,
            },
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as response:
            return int(response.status)


class Stacks:
    """The run's stacks by name, made once. Only the one in use runs: they share the database and the test queue."""

    def __init__(self) -> None:
        self.made: dict[str, Stack] = {}

    def use(self, name: str, **options: Any) -> Stack:
        """The stack called ``name`` (made with ``options`` the first time); every other one is stopped."""
        for other, site in self.made.items():
            if other != name:
                site.stop_all()
        if name not in self.made:
            self.made[name] = Stack(name, **options)
        return self.made[name]

    def stop_all(self) -> None:
        for site in self.made.values():
            site.stop_all()


class Tab:
    """An open chat page's websocket: a real client over TCP with the session's cookie and an allowed Origin.

    A reader thread timestamps every frame and the close. ``messages`` holds
    what the page would show (by id, as the page keeps them); ``receipts``
    counts how often each message id arrived.
    """

    def __init__(self, stack: Stack, session_key: str) -> None:
        self.stack, self.session_key = stack, session_key
        self.frames: list[tuple[float, dict[str, Any]]] = []
        self.messages: dict[str, dict[str, Any]] = {}
        self.receipts: Counter[str] = Counter()
        self.changed = threading.Condition()
        self.current: str | None = None
        self.ws: ClientConnection | None = None
        self.closed_at: float | None = None
        self.close_code: int | None = None
        self.opened_at = 0.0
        self.following = False
        self.reconnects = 0
        self._refs = 0

    def open(self, timeout: float = 15) -> "Tab":
        """Connect and wait for the server's ``ready``; raises when the server refuses or closes instead."""
        connected = threading.Event()
        failed: list[BaseException] = []
        start = len(self.frames)
        threading.Thread(target=self._run, args=(timeout, connected, failed), name="fault-tab", daemon=True).start()
        connected.wait()
        if failed:
            raise failed[0]
        self.wait_for(lambda f: f.get("type") == "ready", timeout, "the socket's ready frame", start=start)
        self.opened_at = time.monotonic()
        return self

    def _run(self, timeout: float, connected: threading.Event, failed: list[BaseException]) -> None:
        """The socket's whole life, in its own thread: connect, then timestamp every frame and the close."""
        try:
            sock = socket.create_connection(("127.0.0.1", self.stack.port), timeout=timeout)  # loopback, no proxy
            sock.settimeout(None)  # an idle tab waits as long as it takes
            connection = connect(
                self.stack.base_url.replace("http://", "ws://") + "/ws/agent/",
                sock=sock,
                origin=self.stack.base_url,  # type: ignore[arg-type]
                additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={self.session_key}"},
                open_timeout=timeout,
            )
        except BaseException as error:
            failed.append(error)
            connected.set()
            return
        with connection as ws:
            with self.changed:
                self.ws, self.closed_at, self.close_code = ws, None, None
            connected.set()
            try:
                for raw in ws:
                    frame = json.loads(raw)
                    with self.changed:
                        self.frames.append((time.monotonic(), frame))
                        self._keep(frame)
                        self.changed.notify_all()
            except ConnectionClosed:
                pass
            finally:
                with self.changed:
                    if ws is self.ws:
                        self.closed_at, self.close_code = time.monotonic(), ws.close_code
                    self.changed.notify_all()

    def _keep(self, frame: dict[str, Any]) -> None:
        views = [frame["message"]] if frame.get("type") == "message" else frame.get("messages") or []
        for view in views:
            self.messages[view["id"]] = view
            self.receipts[view["id"]] += 1

    @property
    def last_message_id(self) -> str | None:
        return max(self.messages.values(), key=lambda v: v["seq"])["id"] if self.messages else None

    def describe(self) -> str:
        """The tab's state and its last frames, for a failure's message."""
        last = [frame.get("type") for _at, frame in self.frames[-8:]]
        state = "open" if self.closed_at is None else f"closed ({self.close_code})"
        return f"{state}, {self.reconnects} reconnects, {len(self.messages)} messages, last frames {last}"

    def shown(self) -> list[str]:
        """The message ids the page shows, in its order (by ``seq``)."""
        return [v["id"] for v in sorted(self.messages.values(), key=lambda v: v["seq"])]

    # -- frames --------------------------------------------------------------------------

    def wait_for(
        self, match: Callable[[dict[str, Any]], Any], timeout: float, what: str, start: int = 0
    ) -> tuple[float, dict[str, Any]]:
        """The first frame from index ``start`` on that matches, with the time it arrived.

        Raises as soon as the socket closes without one: a dead tab is never told.
        """
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for at, frame in self.frames[start:]:
                    if match(frame):
                        return at, frame
                if self.closed_at is not None:
                    raise AssertionError(
                        f"the socket closed ({self.close_code}) {self.closed_at - self.opened_at:.1f} s after it "
                        f"opened, before {what}; daphne's log:\n{self.stack['daphne'].tail(1500)}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
                self.changed.wait(left)

    def request(self, frame: dict[str, Any], timeout: float = 15) -> dict[str, Any]:
        """Send a frame with a fresh ``ref`` and return the server's reply to it (an error frame raises)."""
        self._refs += 1
        ref = f"r{self._refs}"
        start = len(self.frames)
        assert self.ws is not None
        self.ws.send(json.dumps({**frame, "ref": ref}))
        _, reply = self.wait_for(lambda f: f.get("ref") == ref, timeout, f"the reply to {frame['type']}", start=start)
        if reply.get("type") == "error":
            raise AssertionError(f"{frame['type']} was refused: {reply}")
        return reply

    def subscribe(self, chat: Any, *, resync: bool = False) -> dict[str, Any]:
        """Subscribe as the page does: ``after`` its last message when it has any (a resync)."""
        self.current = str(chat)
        after = self.last_message_id if resync else None
        return self.request({"type": "subscribe", "conversation": self.current, "after": after})

    def send(self, text: str) -> str:
        """Start a turn in the current chat; the turn's id."""
        return str(self.request({"type": "send", "conversation": self.current, "text": text})["turn"])

    def turn_frame(self, turn: Any, status: str, timeout: float) -> float:
        """When the tab was told that the turn has ``status``."""
        at, _ = self.wait_for(
            lambda f: f.get("type") == "turn" and f.get("turn") == str(turn) and f.get("status") == status,
            timeout,
            f"turn {turn} {status}",
        )
        return at

    def message_frame(self, match: Callable[[dict[str, Any]], Any], timeout: float, what: str) -> float:
        at, _ = self.wait_for(lambda f: f.get("type") == "message" and match(f["message"]), timeout, what)
        return at

    def wait_showing(self, stored: list[Any], timeout: float) -> float:
        """When the tab shows exactly the ``stored`` messages (rows, in ``seq`` order), the way the page would."""
        ids = [str(message.pk) for message in stored]
        with self.changed:
            if not self.changed.wait_for(lambda: self.shown() == ids, timeout):
                unseen = [message.role for message in stored if str(message.pk) not in self.messages]
                raise AssertionError(
                    f"the tab does not show the chat as stored after {timeout} s: "
                    f"{self.describe()}; never shown: {unseen}"
                )
            return time.monotonic()

    def wait_reconnected(self, timeout: float) -> float:
        """When the tab had reconnected and resynced after the server dropped it."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.reconnects > 0, timeout):
                raise AssertionError(f"the tab did not reconnect within {timeout} s: {self.describe()}")
            return time.monotonic()

    def wait_closed(self, timeout: float) -> tuple[float, int | None]:
        """When the server closed the socket, and its code; raises when it stays open."""
        with self.changed:
            self.changed.wait_for(lambda: self.closed_at is not None, timeout)
            if self.closed_at is None:
                raise AssertionError(f"the socket was still open {timeout} s later")
            return self.closed_at, self.close_code

    def stays_open(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the socket closes first; whether it is still open."""
        with self.changed:
            self.changed.wait_for(lambda: self.closed_at is not None, seconds)
            return self.closed_at is None

    def follow(self) -> "Tab":
        """From now on, reconnect as the page does whenever the server drops the socket (not on 4401)."""
        self.following = True
        threading.Thread(target=self._follow, name="fault-tab-follow", daemon=True).start()
        return self

    def _follow(self) -> None:
        """The page's loop: on a close, jittered exponential backoff, connect, then resync the open chat."""
        attempts = 0
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.closed_at is not None or not self.following)
                if not self.following or self.close_code == CLOSE_SESSION_ENDED:
                    return
            ceiling = min(30.0, 0.5 * 2**attempts)
            attempts += 1
            time.sleep(ceiling / 2 + random.random() * ceiling / 2)
            try:
                self.open(timeout=5)
                if self.current is not None:
                    self.subscribe(self.current, resync=True)
            except (OSError, AssertionError, WebSocketException, TimeoutError):
                self._drop()
                continue
            with self.changed:
                self.reconnects += 1
                self.changed.notify_all()
            attempts = 0

    def _drop(self) -> None:
        """Give up on the current socket, marking it closed so that the page's loop tries again."""
        ws = self.ws
        with self.changed:
            self.closed_at = self.closed_at or time.monotonic()
            self.ws = None
            self.changed.notify_all()
        if ws is not None:
            ws.close()

    def close(self) -> None:
        self.following = False
        self._drop()
