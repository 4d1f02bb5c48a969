"""Message stored → frame in every open tab, over real daphne and Redis.

For 1, 10 and 100 tabs of one chat, and for 1,000 sockets spread over 100
chats (10 tabs each, one user per chat), this process stores assistant
messages ``--interval-ms`` apart (``append_message``, as the turn loop does)
and times each ``message`` frame from the message's commit to its arrival
in each tab. Tabs are real websockets of real sessions, spread over
``--servers`` daphne processes (on ``--port`` and up) behind one Redis. It
prints p50/p95/max, frames delivered of expected, and resyncs (a tab told it
missed events).

Run: ``.venv/bin/python bench/events.py`` (``--tabs 1,10,100 --messages 200
--spread 1000x100 --servers 1``). Daphne runs with the demo site's production
settings: its database connections in Django's pool, as docs/operations.md tells
every process of a site to.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import harness

USERNAME = "bench_events"
TARGETS = {"few": (5.0, 15.0), "many": (None, 50.0)}  # p50, p95 in ms: 1-10 tabs; 100 tabs and 1,000 sockets


class Daphnes:
    """``count`` daphne processes of the demo site on consecutive ports, started and stopped with the bench."""

    def __init__(self, count: int, port: int) -> None:
        self.ports = [port + n for n in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []
        self.log = tempfile.NamedTemporaryFile(prefix="bench-daphne-", suffix=".log", delete=False)

    def __enter__(self) -> "Daphnes":
        env = dict(os.environ)
        daphne = os.path.join(os.path.dirname(sys.executable), "daphne")
        for port in self.ports:
            self.processes.append(
                subprocess.Popen(
                    [daphne, "-b", "127.0.0.1", "-p", str(port), "agent_project.asgi:application"],
                    cwd=harness.ROOT,
                    env=env,
                    stdout=self.log,
                    stderr=subprocess.STDOUT,
                )
            )
        for port in self.ports:
            wait_for_port(port, self.processes)
        return self

    def __exit__(self, *exc: Any) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()

    def cpu_s(self) -> float:
        """CPU seconds the daphne processes used so far, user and system."""
        total = 0
        for process in self.processes:
            with open(f"/proc/{process.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def rss_kib(self, index: int = 0) -> int:
        with open(f"/proc/{self.processes[index].pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def wait_for_port(port: int, processes: list[subprocess.Popen[bytes]], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise SystemExit("daphne exited; see its log")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"daphne did not listen on {port}")


def raise_open_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))


async def connect_subscribed(port: int, session_key: str, chat: str, open_timeout: float = 30) -> Any:
    """A websocket of the session, as the page opens it, once it is ready and subscribed to ``chat``."""
    from websockets.asyncio.client import connect

    ws = await connect(
        f"ws://127.0.0.1:{port}/ws/agent/",
        origin=f"http://127.0.0.1:{port}",
        additional_headers=[("Cookie", f"sessionid={session_key}")],
        open_timeout=open_timeout,
        ping_interval=None,
        max_queue=None,
    )
    assert json.loads(await ws.recv())["type"] == "ready"
    await ws.send(json.dumps({"type": "subscribe", "conversation": chat, "ref": "s"}))
    reply = json.loads(await ws.recv())
    assert reply["type"] == "subscribed", reply
    return ws


@dataclass
class Tab:
    """One open websocket of a session, subscribed to one chat; notes when each message frame came."""

    port: int
    session_key: str
    chat: str
    arrived: dict[str, float] = field(default_factory=dict)
    resyncs: int = 0
    closed: Any = None
    ws: Any = None
    reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self.ws = await connect_subscribed(self.port, self.session_key, self.chat)
        self.reader = asyncio.ensure_future(self.read())

    async def read(self) -> None:
        try:
            async for raw in self.ws:
                now = time.monotonic()
                frame = json.loads(raw)
                if frame["type"] == "message":
                    self.arrived[frame["message"]["id"]] = now
                elif frame["type"] == "ready" and frame.get("resync"):
                    self.resyncs += 1
        except Exception as error:  # the bench reports a tab closed under it
            self.closed = error

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            await self.reader


async def open_all(tabs: list[Tab], at_once: int = 20) -> float:
    """Open every tab, ``at_once`` connecting at a time; the seconds it took.

    Each connect reads the session three times (Channels' session and auth
    middleware, the consumer's check) and each subscribe twice: a thousand at
    once would wait past daphne's 5 s connect timeout on a loaded machine.
    """
    began = time.monotonic()
    gate = asyncio.Semaphore(at_once)

    async def open_one(tab: Tab) -> None:
        async with gate:
            await tab.open()

    await asyncio.gather(*(open_one(tab) for tab in tabs))
    return time.monotonic() - began


def sessions_and_chats(users: int) -> list[tuple[str, str]]:
    """``users`` users of the bench, each with a live session and a fresh chat: (session key, chat id)."""
    from agent import conversations

    pairs = []
    for number in range(users):
        user = harness.bench_user(f"{USERNAME}_{number}")
        ref = harness.login(user)
        chat = conversations.create_conversation(ref, {"title": "bench: events"}, impersonated=False)
        pairs.append((ref.session_key, str(chat.pk)))
    return pairs


def store_messages(chats: list[str], count: int, interval: float, stored: dict[str, float]) -> None:
    """Store ``count`` assistant messages round-robin over ``chats``, ``interval`` apart; note each commit."""
    from django.db import connection

    from agent.conversations import append_message
    from agent.models import Message

    began = time.monotonic()
    for number in range(count):
        chat = chats[number % len(chats)]
        message = append_message(chat, role=Message.Role.ASSISTANT, content=f"Answer number {number}: **bold** text.")
        stored[str(message.pk)] = time.monotonic()  # the commit and its on_commit send are done
        time.sleep(max(0.0, began + (number + 1) * interval - time.monotonic()))
    connection.close()


@dataclass
class Result:
    name: str
    tabs: int
    expected: int
    latencies: list[float]
    resyncs: int
    closed: int
    daphne_cpu_s: float

    @property
    def delivered(self) -> int:
        return len(self.latencies)


async def run_case(
    name: str, servers: Daphnes, users: int, tabs_per_user: int, messages: int, interval: float
) -> Result:
    pairs = await asyncio.to_thread(sessions_and_chats, users)
    ports = servers.ports
    tabs = [
        Tab(ports[n % len(ports)], key, chat)
        for n, (key, chat) in enumerate(p for p in pairs for _ in range(tabs_per_user))
    ]
    await open_all(tabs)
    await asyncio.sleep(1.5)  # past the connect-time checks: the timed part pays for its own
    stored: dict[str, float] = {}
    cpu_before = servers.cpu_s()
    await asyncio.to_thread(store_messages, [chat for _key, chat in pairs], messages, interval, stored)
    expected = messages * tabs_per_user
    deadline = time.monotonic() + 15
    while sum(len(t.arrived) for t in tabs) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    cpu = servers.cpu_s() - cpu_before
    latencies = [arrived - stored[mid] for tab in tabs for mid, arrived in tab.arrived.items() if mid in stored]
    result = Result(
        name, len(tabs), expected, latencies, sum(t.resyncs for t in tabs), sum(t.closed is not None for t in tabs), cpu
    )
    await asyncio.gather(*(tab.close() for tab in tabs))
    return result


def report(results: list[Result]) -> None:
    head = (
        f"{'case':<28}{'tabs':>6}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'delivered':>20}{'resyncs':>9}"
        f"{'closed':>8}{'daphne CPU µs/frame':>21}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r.name:<28}{r.tabs:>6}{harness.ms(harness.median(r.latencies)):>9}"
            f"{harness.ms(harness.pct(r.latencies, 95)):>9}{harness.ms(max(r.latencies, default=float('nan'))):>9}"
            f"{f'{r.delivered:,} of {r.expected:,}':>20}{r.resyncs:>9}{r.closed:>8}"
            f"{r.daphne_cpu_s / max(r.delivered, 1) * 1e6:>21.0f}"
        )
    print()
    for r in results:
        p50_target, p95_target = TARGETS["few" if r.tabs <= 10 else "many"]
        checks = [harness.pct(r.latencies, 95) * 1000 <= p95_target, r.delivered == r.expected]
        if p50_target is not None:
            checks.append(harness.median(r.latencies) * 1000 <= p50_target)
        targets = f"p50 ≤ {p50_target:g} ms, " if p50_target else ""
        print(f"{r.name}: {targets}p95 ≤ {p95_target:g} ms, none lost: {harness.verdict(all(checks))}")


async def bench(args: argparse.Namespace) -> list[Result]:
    interval = args.interval_ms / 1000
    results = []
    with Daphnes(args.servers, args.port) as servers:
        for tabs in args.tabs:
            messages = args.messages if tabs < 100 else args.messages // 2
            results.append(await run_case(f"one chat, {tabs} tab(s)", servers, 1, tabs, messages, interval))
        if args.spread:
            sockets, chats = args.spread
            results.append(
                await run_case(
                    f"{sockets:,} sockets, {chats} chats", servers, chats, sockets // chats, args.messages, interval
                )
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tabs", type=lambda s: [int(n) for n in s.split(",") if n], default=[1, 10, 100])
    parser.add_argument("--messages", type=int, default=200, help="messages per case (half for 100 tabs)")
    parser.add_argument("--interval-ms", type=float, default=50)
    parser.add_argument(
        "--spread",
        type=lambda s: tuple(int(n) for n in s.split("x")) if s else None,
        default=(1000, 100),
        help="SOCKETSxCHATS, or '' to skip",
    )
    parser.add_argument("--servers", type=int, default=1, help="daphne processes behind one Redis")
    parser.add_argument("--port", type=int, default=8101)
    args = parser.parse_args()
    raise_open_files()
    harness.setup()
    from django.db import connection

    print(
        f"daphne ×{args.servers}, Redis {os.environ['REDIS_URL']}, PostgreSQL {connection.settings_dict['NAME']}; "
        f"messages {args.interval_ms:g} ms apart; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    connection.close()
    report(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
