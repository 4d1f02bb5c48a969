"""Turns per second with 1, 2 and 4 prefork worker processes, on PostgreSQL and Redis.

Each turn has the shape of ``turn_overhead.py``'s: 2 rounds of 2 reads, then the answer (3 model
calls). The model is a stateless scripted server in this process that answers at once, or after
``--delay`` seconds (500 ms by default in the second pass). The driver keeps two turns per worker
in flight, each in its own user's chat, starting them through ``agent.turns.start`` (what the web
does) from a few threads, and the workers (``celery -A agent_project worker -P prefork -c N``)
run them. Counted: the turns that ended in the measured window, after a warm-up.

Besides turns per second it prints turns per second per worker process, per CPU second the workers
spent (their own ``/proc`` times: "per core"), and each prefork child's resident and proportional
memory (RSS, PSS) at the end of the window.

Run: ``.venv/bin/python bench/throughput.py`` (``--workers 1,2,4``, ``--seconds 20``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import harness

ANSWER = "Your notes say to buy milk on Friday and rye bread from the bakery."
POLL_S = 0.025


class StatelessModel:
    """An OpenAI-compatible server whose reply depends on the request alone, so concurrent turns
    each get their shape: tool calls while the turn has made fewer than two rounds, then the answer."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.calls = 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if model.delay:
                    time.sleep(model.delay)
                model.calls += 1
                data = json.dumps(model.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        rounds = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "assistant" and m.get("tool_calls"))
        message: dict[str, Any] = {"role": "assistant", "content": ANSWER}
        if body.get("tools") and rounds < 2:
            words = ("milk", "bread") if rounds == 0 else ("bakery", "eggs")
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{uuid.uuid4().hex[:8]}",
                        "type": "function",
                        "function": {"name": "notes_search", "arguments": json.dumps({"query": word})},
                    }
                    for word in words
                ],
            }
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted-model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }


def prepare(users: int) -> list[tuple[Any, Any]]:
    """``users`` bench users with a few notes each, each signed in with one chat."""
    from agent.models import Conversation
    from agent_project.notes.models import Note

    pairs = []
    for number in range(users):
        user = harness.bench_user(f"bench_throughput_{number}", "notes.view_note")
        if not Note.objects.filter(owner=user).exists():
            for title in ("Milk", "Bread", "Shopping"):
                Note.objects.create(owner=user, title=title, body=f"{title}: milk, bread, eggs from the bakery.")
        chat = Conversation.objects.create(user=user, title="bench: throughput")
        pairs.append((harness.login(user), chat))
    return pairs


class Workers:
    """``celery -A agent_project worker -P prefork -c N`` in its own process group, stopped by its pid."""

    def __init__(self, count: int, log: str) -> None:
        from agent.core.conf import agent_settings

        command = [
            sys.executable, "-m", "celery", "-A", "agent_project", "worker", "-P", "prefork", "-c", str(count),
            "-Q", agent_settings.TASK_QUEUE, "-O", "fair",
            "-l", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        self.log = open(log, "w")
        self.process = subprocess.Popen(
            command, cwd=harness.ROOT, env=os.environ.copy(), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def processes(self) -> list[int]:
        """The worker's main process and its prefork children (and theirs)."""
        found, queue = [], [self.process.pid]
        while queue:
            pid = queue.pop()
            found.append(pid)
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as children:
                    queue.extend(int(child) for child in children.read().split())
            except FileNotFoundError:
                pass
        return found

    def cpu_seconds(self) -> float:
        """User and system CPU the worker's processes have spent so far."""
        ticks = 0
        for pid in self.processes():
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def child_memory_mib(self) -> list[tuple[float, float]]:
        """(RSS, PSS) of each prefork child, in MiB: PSS counts pages shared after the fork once."""
        sizes = []
        for pid in self.processes()[1:]:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as rollup:
                    kib = {line.split(":")[0]: int(line.split()[1]) for line in rollup if line.split()[-1] == "kB"}
            except FileNotFoundError:
                continue
            sizes.append((kib["Rss"] / 1024, kib["Pss"] / 1024))
        return sizes

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the group this bench started: the worker and its children
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def measure(pairs: list[tuple[Any, Any]], workers: Workers, warmup: float, seconds: float) -> dict[str, Any]:
    """Keep a turn in flight in every chat; the turns that ended in the measured window, which opens
    ``warmup`` seconds after the first turn ended (the workers are up by then), and the CPU the
    workers spent in it."""
    from django.db import close_old_connections

    from agent import turns
    from agent.models import Turn

    def start(ref: Any, chat: Any) -> Any:
        try:
            return turns.start(ref, chat.pk, "What do my notes say about milk and bread?", impersonated=False)
        finally:
            close_old_connections()

    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bench-driver")
    inflight: dict[Any, tuple[Any, Any]] = {}
    pending = {pool.submit(start, ref, chat): (ref, chat) for ref, chat in pairs}
    window = (float("inf"), float("inf"))
    ended: list[tuple[float, float, str]] = []  # (when seen ended, turn time, status)
    cpu_at_open: float | None = None
    while time.monotonic() < window[1]:
        if cpu_at_open is None and time.monotonic() >= window[0]:
            cpu_at_open = workers.cpu_seconds()
        for future in [f for f in pending if f.done()]:
            ref, chat = pending.pop(future)
            inflight[future.result().pk] = (ref, chat)
        if inflight:
            rows = Turn.objects.filter(pk__in=list(inflight)).exclude(status__in=Turn.LIVE)
            for pk, status, created, done in rows.values_list("pk", "status", "created_at", "ended_at"):
                ref, chat = inflight.pop(pk)
                if not ended:
                    window = (time.monotonic() + warmup, time.monotonic() + warmup + seconds)
                ended.append((time.monotonic(), (done - created).total_seconds(), status))
                pending[pool.submit(start, ref, chat)] = (ref, chat)
        time.sleep(POLL_S)
    worker_cpu = workers.cpu_seconds() - (cpu_at_open or 0.0)
    memory = workers.child_memory_mib()
    pool.shutdown(wait=True)
    counted = [e for e in ended if window[0] <= e[0] <= window[1]]
    times = [e[1] for e in counted]
    return {
        "turns_per_second": len(counted) / seconds,
        "turns": len(counted),
        "failed": sum(1 for e in counted if e[2] != Turn.Status.FINISHED),
        "p50": harness.median(times),
        "p95": harness.pct(times, 95),
        "left_running": len(inflight) + len(pending),
        "worker_cpu_per_second": worker_cpu / seconds,
        "turns_per_cpu_second": len(counted) / worker_cpu if worker_cpu else float("nan"),
        "child_rss_mib": [rss for rss, _pss in memory],
        "child_pss_mib": [pss for _rss, pss in memory],
    }


def drain(timeout: float = 60) -> None:
    """Wait for the turns still queued or running to end (their workers are still up)."""
    from agent.models import Turn

    deadline = time.monotonic() + timeout
    while Turn.objects.filter(user__username__startswith="bench_throughput_", status__in=Turn.LIVE).exists():
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4", help="worker process counts, comma-separated")
    parser.add_argument("--delays", default="0,0.5", help="the model's answer delays in seconds, comma-separated")
    parser.add_argument("--seconds", type=float, default=20, help="measured window per run")
    parser.add_argument("--warmup", type=float, default=5, help="seconds after the first turn ended")
    args = parser.parse_args()
    os.environ.setdefault("AGENT_LOG_LEVEL", "WARNING")
    harness.setup()
    from turn_overhead import point_endpoint_at, purge_queue

    from agent_project.celery import app

    counts = [int(n) for n in args.workers.split(",")]
    delays = [float(d) for d in args.delays.split(",")]
    model = StatelessModel()
    point_endpoint_at(model.base_url)
    pairs = prepare(2 * max(counts))
    print(
        f"{len(pairs)} users with a chat each; two turns in flight per worker; turns of 3 model calls "
        f"(2 rounds of 2 reads, then the answer); broker {app.conf.broker_url}; {args.warmup:.0f} s warm-up, "
        f"{args.seconds:.0f} s measured per run"
    )
    rows = []
    for delay in delays:
        model.delay = delay
        for count in counts:
            purge_queue()
            workers = Workers(count, f"/tmp/bench-throughput-worker-{count}.log")
            try:
                busy = harness.BusyCores()
                result = measure(pairs[: 2 * count], workers, args.warmup, args.seconds)
                result["busy_cores"] = busy.since()
                drain()
            finally:
                workers.stop()
            rows.append((delay, count, result))
            print(
                f"  model after {delay * 1000:4.0f} ms, {count} worker(s): {result['turns_per_second']:5.2f} turns/s "
                f"({result['turns']} turns, {result['failed']} not finished), turn p50 {result['p50']:.2f} s, "
                f"p95 {result['p95']:.2f} s; machine busy cores {result['busy_cores']:.2f}",
                flush=True,
            )
            print(
                f"    per worker process {result['turns_per_second'] / count:5.2f} turns/s; the workers used "
                f"{result['worker_cpu_per_second']:.2f} cores: {result['turns_per_cpu_second']:5.2f} turns per "
                f"CPU second; each child RSS {harness.median(result['child_rss_mib']):.0f} MiB, "
                f"PSS {harness.median(result['child_pss_mib']):.0f} MiB (median of {len(result['child_rss_mib'])})",
                flush=True,
            )
    print("\nturns per second (turn time p50), by worker processes:")
    print(f"  {'model answers':<16}" + "".join(f"{f'{n} worker(s)':>22}" for n in counts))
    for delay in delays:
        cells = [r for d, n, r in rows if d == delay]
        print(
            f"  {'at once' if not delay else f'after {delay * 1000:.0f} ms':<16}"
            + "".join(f"{r['turns_per_second']:>11.2f} ({r['p50']:5.2f} s)" for r in cells)
        )
    print("\nturns per CPU second of the workers (≥ 30 is the aim), by worker processes:")
    for delay in delays:
        cells = [r for d, n, r in rows if d == delay]
        print(
            f"  {'at once' if not delay else f'after {delay * 1000:.0f} ms':<16}"
            + "".join(f"{r['turns_per_cpu_second']:>22.1f}" for r in cells)
        )
    for delay in [d for d in delays if d]:
        bounds = ", ".join(f"{n}: {n / (3 * delay):.2f}" for n in counts)
        print(f"  the model alone bounds it after {delay * 1000:.0f} ms at workers / (3 × delay): {bounds}")
    purge_queue()


if __name__ == "__main__":
    main()
