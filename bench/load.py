"""Load held: a closed loop of signed-in users over the whole product in production shape.

daphne, Celery workers started with the command docs/operations.md gives (``--worker``), one beat,
PostgreSQL and Redis, and a scripted OpenAI-compatible model in a process of its own that streams its
answer after ``--delay`` seconds. Each of ``--users`` users is a real session with one websocket,
subscribed to its own chat, that sends its next message as soon as the tab is told the last turn
ended (or ``--pause`` seconds later, for the latency of a machine that is not saturated). Every
process reads the demo site's production settings (``agent_project.settings``) and the database
settings docs/operations.md recommends, but for the socket's frame limit (``load_settings``): a
bench user sends faster than any person.

Printed, over the ``--seconds`` measured after ``--warm-up``:

- turns per second, and against the ideal ``users / (delay + pause + 1 s)``;
- send → first streamed word (``delta`` frame) and send → answer (``message`` frame) p50/p95;
- lost (a send with no answer), stuck (a turn not ended after the drain), duplicated (a message
  shown twice on a socket, or a turn with other than one user message and one answer in the
  database) and refused sends;
- CPU per turn by process group (daphne, workers, beat, PostgreSQL's backends of the bench's
  database, the bench's Redis server), and the machine's busy cores (other work on the machine shows there);
- each process's resident memory, and the workers' growth per turn in flight;
- PostgreSQL sessions opened (``pg_stat_database.sessions``) in the window, per second and per turn.

Run: ``.venv/bin/python bench/load.py --users 10 --delay 0 --seconds 30`` (``--workers 2``,
``--worker "celery -A agent_project worker -Q agent -P threads -c 100"``, ``--port``,
``--port`` for daphne's). Uses the bench environment of ``harness.DEFAULTS`` (its own database and
Redis db: the broker's queue ``agent`` there is the bench's own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import harness
from events import connect_subscribed

USERNAME = "bench_load"
ANSWER = "Your notes say to buy milk on Friday and rye bread from the bakery on the corner."
WORKER = "celery -A agent_project worker -Q agent -P threads -c 100"
"""docs/operations.md's worker command."""
SAMPLE_S = 0.25


# -- the model ---------------------------------------------------------------------------------


def serve_model(port: int, delay: float) -> None:
    """An OpenAI-compatible server (run as a process of its own): every call waits ``delay`` seconds,
    then streams the same answer a word per chunk (or sends it whole when not asked to stream)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            time.sleep(delay)
            usage = {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140}
            if not body.get("stream"):
                message = {"role": "assistant", "content": ANSWER}
                self.reply("application/json", json.dumps(_completion(message, usage)).encode())
                return
            words = ANSWER.split(" ")
            events = [
                _chunk({"role": "assistant", "content": word if n == 0 else " " + word}) for n, word in enumerate(words)
            ]
            events.append(_chunk({}, finish="stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                events.append({**_chunk({}), "choices": [], "usage": usage})
            data = b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events) + b"data: [DONE]\n\n"
            self.reply("text/event-stream", data)

        def reply(self, content_type: str, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024  # hundreds of turns connect at once: the default backlog of 5 resets them

    Server(("127.0.0.1", port), Handler).serve_forever()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "load", "object": "chat.completion.chunk", "created": 0, "model": "load-model", "choices": [choice]}


def _completion(message: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {"id": "load", "object": "chat.completion", "created": 0, "model": "load-model", "choices": [choice]} | {
        "usage": usage
    }


# -- the processes -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args} exited; see its log")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


class Site:
    """The product's processes, each in a group of its own; stopped with the bench."""

    def __init__(self, args: argparse.Namespace, environ: dict[str, str]) -> None:
        self.args = args
        self.port = args.port or free_port()
        self.model_port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="bench-load-"))
        self.groups: dict[str, list[subprocess.Popen[bytes]]] = {}
        self.env = {**environ, "PYTHONUNBUFFERED": "1"}

    def spawn(self, group: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.directory / f"{group}-{len(self.groups.get(group, []))}.log", "wb")
        env = {**self.env, "PGAPPNAME": f"bench-load-{group}"}  # whose each PostgreSQL session is
        process = subprocess.Popen(argv, cwd=harness.ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.groups.setdefault(group, []).append(process)
        return process

    def __enter__(self) -> "Site":
        bin_dir = os.path.dirname(sys.executable)
        model = self.spawn(
            "model", [sys.executable, __file__, "--serve-model", str(self.model_port), str(self.args.delay)]
        )
        daphne = self.spawn(
            "daphne", [f"{bin_dir}/daphne", "-b", "127.0.0.1", "-p", str(self.port), "agent_project.asgi:application"]
        )
        worker = shlex.split(self.args.worker)
        for number in range(self.args.workers):
            self.spawn(
                "workers",
                [
                    f"{bin_dir}/{worker[0]}",
                    *worker[1:],
                    "-n",
                    f"load{number}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "-l",
                    "WARNING",
                ],
            )
        self.spawn(
            "beat",
            [
                f"{bin_dir}/celery",
                "-A",
                "agent_project",
                "beat",
                "-l",
                "WARNING",
                "-s",
                str(self.directory / "beat-schedule"),
            ],
        )
        wait_for_port(self.model_port, model)
        wait_for_port(self.port, daphne)
        self.wait_for_workers()
        return self

    def wait_for_workers(self, within: float = 180) -> None:
        """Until every worker answers a ping: on a busy machine a worker takes tens of seconds to start."""
        from agent_project.celery import app

        deadline = time.monotonic() + within
        while len(app.control.ping(timeout=1.0)) < self.args.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.groups["workers"]):
                raise SystemExit(f"the workers did not start; see {self.directory}")

    def __exit__(self, *exc: Any) -> None:
        for processes in self.groups.values():
            for process in processes:
                process.send_signal(signal.SIGTERM)
        for processes in self.groups.values():
            for process in processes:
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()

    def pids(self, group: str) -> list[int]:
        """The group's processes and their children (a prefork worker's pool)."""
        found = []
        for process in self.groups.get(group, []):
            found.append(process.pid)
            found.extend(children(process.pid))
        return found

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.model_port}/v1"


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listed:
            kids = [int(p) for p in listed.read().split()]
    except OSError:
        return []
    return [grand for kid in kids for grand in (kid, *children(kid))]


def cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return 0.0


class CpuMeter:
    """CPU seconds each group of processes spent while it runs, sampled every ``SAMPLE_S`` so that
    short-lived processes (a database backend per connection) are counted up to their last sample."""

    def __init__(self, groups: dict[str, Any]) -> None:
        self.groups = groups  # name -> callable giving the group's pids now
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.owner: dict[int, str] = {}
        self.running = False

    def sample(self) -> None:
        for name, pids in self.groups.items():
            for pid in pids():
                spent = cpu_s(pid)
                if spent is None:
                    continue
                self.first.setdefault(pid, spent if self.running else spent)
                self.last[pid] = spent
                self.owner[pid] = name

    def start(self) -> "CpuMeter":
        self.sample()
        self.running = True
        threading.Thread(target=self._loop, daemon=True).start()
        return self

    def _loop(self) -> None:
        while self.running:
            time.sleep(SAMPLE_S)
            self.sample()

    def stop(self) -> dict[str, float]:
        self.running = False
        self.sample()
        spent: Counter[str] = Counter()
        for pid, last in self.last.items():
            spent[self.owner[pid]] += last - self.first[pid]
        return dict(spent)


class NewBackends:
    """PostgreSQL backends of the bench's database, found by their command line (``postgres: user db ...``)."""

    def __init__(self, database: str) -> None:
        self.marker = f" {database} "

    def __call__(self) -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                        line = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if line.startswith("postgres: ") and self.marker in line and int(entry) not in OWN_BACKENDS:
                    found.append(int(entry))
        return found


def own_backend(pids: set[int]) -> None:
    """Note this thread's PostgreSQL backend as the bench's own: its CPU is not the product's."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pids.add(cursor.fetchone()[0])


OWN_BACKENDS: set[int] = set()


class SessionsSeen:
    """New PostgreSQL sessions of the bench's database by process group (``application_name``), from
    ``pg_stat_activity`` every 10 ms: a session shorter than that may be missed, the total is exact."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.known: set[int] = set()
        self.new: Counter[str] = Counter()
        self.running = True
        self.sample(count=False)
        threading.Thread(target=self._loop, daemon=True).start()

    def sample(self, *, count: bool = True) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, application_name FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [self.database],
            )
            for pid, name in cursor.fetchall():
                if pid not in self.known:
                    self.known.add(pid)
                    if count:
                        self.new[name.removeprefix("bench-load-") or "?"] += 1

    def _loop(self) -> None:
        from django.db import connection

        own_backend(OWN_BACKENDS)
        while self.running:
            self.sample()
            time.sleep(0.01)
        connection.close()


def sessions_opened(database: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", [database])
        return int(cursor.fetchone()[0])


def redis_pid(url: str) -> int | None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return int(client.info("server")["process_id"])
    except Exception:
        return None
    finally:
        client.close()


# -- the users ---------------------------------------------------------------------------------


@dataclass
class Sent:
    at: float
    turn: str = ""
    accepted: float | None = None
    first_delta: float | None = None
    answer: float | None = None
    ended: float | None = None
    refused: str = ""
    resynced: bool = False  # the tab was told it missed an event and read the chat again


@dataclass
class User:
    port: int
    session_key: str
    chat: str
    sent: list[Sent] = field(default_factory=list)
    receipts: Counter[str] = field(default_factory=Counter)
    closed: Any = None
    ready_at: float | None = None
    last_message: str = ""

    async def run(self, stop: threading.Event, pause: float) -> None:
        """Send, wait for the turn's end, ``pause`` seconds (a person reading), send again, until ``stop``
        is set; every frame noted."""
        async with await connect_subscribed(self.port, self.session_key, self.chat, open_timeout=60) as ws:
            self.ready_at = time.monotonic()
            number = 0
            try:
                while not stop.is_set():
                    number += 1
                    await self.one_turn(ws, number)
                    await asyncio.sleep(pause)
            except Exception as error:  # the report counts a socket that broke under load
                self.closed = error

    async def one_turn(self, ws: Any, number: int) -> None:
        """One send and its turn, to the turn's end; told to resync, the tab reads what it missed (as the
        page does: subscribing again after the last message it holds) before it counts the turn done."""
        sent = Sent(time.monotonic())
        self.sent.append(sent)
        ref = f"m{number}"
        resyncing = False
        await ws.send(json.dumps({"type": "send", "conversation": self.chat, "text": f"question {number}", "ref": ref}))
        while not (sent.ended and not resyncing):
            raw = await asyncio.wait_for(ws.recv(), timeout=120)
            now = time.monotonic()
            frame = json.loads(raw)
            kind = frame.get("type")
            if kind == "message":
                self.saw(frame["message"], sent, now)
            elif kind == "ready" and frame.get("resync") == self.chat:
                sent.resynced = resyncing = True
                again = {"type": "subscribe", "conversation": self.chat, "ref": f"r{number}"}
                await ws.send(json.dumps({**again, "after": self.last_message} if self.last_message else again))
            elif kind == "subscribed" and resyncing:
                resyncing = False
                for message in frame["messages"]:
                    self.saw(message, sent, now)
            if frame.get("ref") == ref:
                if kind != "accepted":
                    sent.refused = str(frame.get("code") or kind)
                    await asyncio.sleep(0.5)
                    return
                sent.turn, sent.accepted = frame["turn"], now
            elif kind == "delta" and sent.first_delta is None and frame.get("turn") == sent.turn:
                sent.first_delta = now
            elif kind == "turn" and frame.get("turn") == sent.turn and frame.get("status") == "ended":
                sent.ended = now

    def saw(self, message: dict[str, Any], sent: Sent, now: float) -> None:
        """A message the tab got, on its event or in a read after a resync."""
        self.receipts[message["id"]] += 1
        self.last_message = message["id"]
        if message.get("role") == "assistant" and sent.answer is None:
            sent.answer = now


def users_with_chats(count: int, port: int) -> list[User]:
    from agent import conversations

    made = []
    for number in range(count):
        user = harness.bench_user(f"{USERNAME}_{number}")
        ref = harness.login(user)
        chat = conversations.create_conversation(ref, {"title": "bench: load"}, impersonated=False)
        made.append(User(port, ref.session_key, str(chat.pk)))
    return made


def point_endpoint_at(base_url: str) -> None:
    from agent.models import AgentSettings, Endpoint

    endpoint, _created = Endpoint.objects.update_or_create(
        name="bench-load",
        defaults={"base_url": base_url, "api_key": "sk-bench", "model": "load-model", "timeout_s": 60, "enabled": True},
    )
    site = AgentSettings.current()
    site.enabled = True
    site.default_endpoint = endpoint
    site.save()


class InFlight:
    """Turns running, counted in the database every ``SAMPLE_S``."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.running = True
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        from django.db import connection

        from agent.models import Turn

        own_backend(OWN_BACKENDS)
        while self.running:
            self.counts.append(Turn.objects.filter(status__in=Turn.LIVE).count())
            time.sleep(SAMPLE_S)
        connection.close()


# -- the run -----------------------------------------------------------------------------------


def percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"p50 {harness.pct(values, 50) * 1000:.0f} ms, p95 {harness.pct(values, 95) * 1000:.0f} ms"


def check_database(users: list[User]) -> tuple[int, int]:
    """(stuck, duplicated) for the bench's turns: not ended, or other than one user message and one answer."""
    from django.db.models import Count, Q

    from agent.models import Message, Turn

    chats = [u.chat for u in users]
    stuck = Turn.objects.filter(conversation_id__in=chats, status__in=Turn.LIVE).count()
    per_turn = (
        Message.objects.filter(conversation_id__in=chats, turn__isnull=False)
        .values("turn")
        .annotate(users=Count("id", filter=Q(role="user")), answers=Count("id", filter=Q(role="assistant")))
    )
    duplicated = sum(1 for row in per_turn if row["users"] != 1 or row["answers"] > 1)
    return stuck, duplicated


def what_became_of(sent: Sent) -> str:
    """A lost send's turn as its socket saw it and as the database has it, to tell where it went missing."""
    from agent.models import Message, Turn

    seen = {"first delta": sent.first_delta, "answer": sent.answer, "ended": sent.ended}
    turn = Turn.objects.filter(pk=sent.turn).values("status", "end_reason").first()
    stored = list(Message.objects.filter(turn_id=sent.turn).order_by("created_at").values_list("role", flat=True))
    on_socket = ", ".join(f"{name} {'yes' if at else 'no'}" for name, at in seen.items())
    return f"turn {sent.turn}: on the socket {on_socket}; in the database {turn}, messages {stored}"


async def drive(users: list[User], stop: threading.Event, pause: float) -> None:
    await asyncio.gather(*(user.run(stop, pause) for user in users))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds the model waits before its answer")
    parser.add_argument("--seconds", type=float, default=30.0, help="the measured window")
    parser.add_argument("--warm-up", type=float, default=5.0)
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds a user waits after an answer before the next send"
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--worker", default=WORKER, help="the worker command, as docs/operations.md gives it")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--serve-model", nargs=2, metavar=("PORT", "DELAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model:
        serve_model(int(args.serve_model[0]), float(args.serve_model[1]))
        return
    for name, value in harness.DEFAULTS.items():
        os.environ.setdefault(name, value)
    bench = str(Path(__file__).parent)
    site_environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "load_settings",  # the demo's production settings; no frame limit for the users
        "PYTHONPATH": os.pathsep.join(filter(None, [bench, os.environ.get("PYTHONPATH", "")])),
    }
    os.environ["DATABASE_POOL_SIZE"] = "0"  # the bench's own connections stay with their threads, not in a pool
    harness.setup()
    own_backend(OWN_BACKENDS)
    from django.conf import settings

    from agent.models import Turn

    database = settings.DATABASES["default"]["NAME"]
    Turn.objects.filter(status__in=Turn.LIVE).update(status=Turn.Status.INTERRUPTED)  # a previous run's leftovers
    redis = redis_pid(os.environ["REDIS_URL"])
    with Site(args, site_environ) as site:
        point_endpoint_at(site.base_url)
        users = users_with_chats(args.users, site.port)
        time.sleep(3)  # the workers ready
        worker_rss_idle = {pid: rss_mib(pid) for pid in site.pids("workers")}
        print(
            f"{args.users} users, model delay {args.delay:g} s, pause {args.pause:g} s, "
            f"{args.workers} × `{args.worker}`, "
            f"{args.warm_up:g} s warm-up + {args.seconds:g} s measured; load before: {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        loop = asyncio.new_event_loop()
        started = time.monotonic()
        stop = threading.Event()
        runner = threading.Thread(target=loop.run_until_complete, args=(drive(users, stop, args.pause),))
        runner.start()
        while not all(u.ready_at for u in users) and runner.is_alive():
            time.sleep(0.1)  # every socket open and subscribed, then the warm-up
        began = time.monotonic()
        print(f"sockets open in {began - started:.1f} s", flush=True)
        time.sleep(args.warm_up)
        meter = CpuMeter(
            {
                "daphne": lambda: site.pids("daphne"),
                "workers": lambda: site.pids("workers"),
                "beat": lambda: site.pids("beat"),
                "postgres": NewBackends(database),
                "redis": lambda: [redis] if redis else [],
                "model": lambda: site.pids("model"),
                "bench users": lambda: [os.getpid()],
            }
        ).start()
        busy = harness.BusyCores()
        opened_before = sessions_opened(database)
        in_flight = InFlight()
        seen = SessionsSeen(database)
        window_start = time.monotonic()
        time.sleep(max(0.0, began + args.warm_up + args.seconds - time.monotonic()))
        window_end = time.monotonic()
        stop.set()  # each user ends after its turn under way
        spent = meter.stop()
        cores = busy.since()
        opened = sessions_opened(database) - opened_before
        in_flight.running = seen.running = False
        rss = {group: [(pid, rss_mib(pid)) for pid in site.pids(group)] for group in ("daphne", "workers", "beat")}
        load = os.getloadavg()
        runner.join(timeout=180)
        time.sleep(2)
        stuck, duplicated = check_database(users)
    window = window_end - window_start
    sends = [s for u in users for s in u.sent if window_start <= s.at < window_end]
    done = [s for u in users for s in u.sent if s.answer is not None and window_start <= s.answer < window_end]
    answered = [s for s in sends if s.answer is not None]
    refused = Counter(s.refused for s in sends if s.refused)
    lost = sum(1 for u in users for s in u.sent if s.turn and (s.answer is None or s.ended is None))
    shown_twice = sum(1 for u in users for count in u.receipts.values() if count > 1)
    resynced = sum(1 for u in users for s in u.sent if s.resynced)
    broken = sum(1 for u in users if u.closed is not None)
    rate = len(done) / window
    ideal = args.users / (args.delay + args.pause + 1)
    turns = max(len(done), 1)
    print(
        f"turns/s: {rate:.2f} ({len(done)} answers in {window:.1f} s); "
        f"ideal users/(delay+pause+1 s) = {ideal:.2f}: {rate / ideal:.0%}"
    )
    print(f"send → first delta: {percentiles([s.first_delta - s.at for s in answered if s.first_delta])}")
    print(f"send → answer:      {percentiles([s.answer - s.at for s in answered])}")
    print(f"answer → turn ended on the socket: {percentiles([s.ended - s.answer for s in answered if s.ended])}")
    print(f"send → accepted: {percentiles([s.accepted - s.at for s in sends if s.accepted])}")
    print(
        f"lost {lost}, stuck {stuck}, duplicated {duplicated} in the database, {shown_twice} shown twice on a socket, "
        f"{broken} sockets broken, refused {dict(refused) or 0}; "
        f"{resynced} turns whose tab was told it missed an event and read the chat again"
    )
    for why, count in Counter(repr(u.closed) for u in users if u.closed is not None).items():
        print(f"  broken {count}: {why}")
    for user in users:
        for sent in user.sent:
            if sent.turn and (sent.answer is None or sent.ended is None):
                print(f"  lost: {what_became_of(sent)}")
    product = ("daphne", "workers", "beat", "postgres", "redis")
    per_group = ", ".join(f"{name} {spent.get(name, 0) / turns * 1000:.1f}" for name in product)
    machine = sum(spent.get(name, 0) for name in product)
    print(
        f"CPU per turn (ms): {machine / turns * 1000:.1f} = {per_group}; not the product's: "
        f"model {spent.get('model', 0) / turns * 1000:.1f}, "
        f"bench users {spent.get('bench users', 0) / turns * 1000:.1f}"
    )
    print(
        f"machine busy cores during the window: {cores:.2f} of {os.cpu_count()}; "
        f"load average {load[0]:.2f} {load[1]:.2f}"
    )
    mean_in_flight = sum(in_flight.counts) / max(len(in_flight.counts), 1)
    for group, rows in rss.items():
        print(f"RSS {group}: " + ", ".join(f"{pid} {mib:.0f} MiB" for pid, mib in rows))
    grown = sum(mib - worker_rss_idle.get(pid, mib) for pid, mib in rss["workers"])
    print(
        f"turns in flight: mean {mean_in_flight:.1f}, max {max(in_flight.counts, default=0)}; workers' RSS growth "
        f"from idle {grown:.0f} MiB ({grown / max(mean_in_flight, 1):.2f} MiB per turn in flight)"
    )
    print(
        f"PostgreSQL sessions opened: {opened} ({opened / window:.2f}/s, {opened / turns:.3f} per turn); "
        f"seen by process group: {dict(seen.new)}"
    )


if __name__ == "__main__":
    main()
