"""Streamed answers: model chunk → delta in an open tab, coalescing, non-model time.

1. Latency: the model (``tests/support/model_server.py``, in this process) writes one
   word every ``--chunk-ms`` (150: slower than ``STREAM_INTERVAL_MS``, so each
   chunk makes a delta); turns run with ``agent.tasks.run_turn`` in this
   process; real websocket tabs of a logged-in user, subscribed to the chat
   over real daphne and Redis, note each ``delta`` frame. A frame's latency
   runs from the server writing the chunk whose text completes the frame's
   text to the tab reading the frame. The server thread and the tabs share
   this process's ``time.monotonic()``. For 1 and 10 tabs (``--tabs``).
2. Coalescing: a chunk every ``--fast-chunk-ms`` (7.5) for about 3 s; the
   deltas a tab got, the gaps between them as it read them, and the gaps
   between the runner's sends (timed by a shim on ``agent.core.events.answer_delta``).
3. Non-model time per round with streaming on and off, turns alternating, each
   in its own short chat, timed by ``bench/turn_overhead.py``'s shims and
   ``run_one``; the endpoint's ``supports_streaming`` is switched between turns.

Run: ``.venv/bin/python bench/stream.py`` (``--tabs 1,10 --turns 3 --words 40
--overhead-turns 200``). Uses the database ``agent_bench_stream`` and Redis db 13.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import harness
import turn_overhead as overhead
from events import Daphnes, Tab, open_all, raise_open_files

USERNAME = "bench_stream"
TARGET_P50_MS = 20.0
QUESTION = "Tell me a long story."

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agent_bench_stream")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")


@dataclass
class DraftTab(Tab):
    """A tab that notes each delta frame: (turn, text, when it was read)."""

    deltas: list[tuple[str, str, float]] = field(default_factory=list)

    async def read(self) -> None:
        try:
            async for raw in self.ws:
                now = time.monotonic()
                frame = json.loads(raw)
                if frame["type"] == "delta":
                    self.deltas.append((frame["turn"], frame["text"], now))
                elif frame["type"] == "ready" and frame.get("resync"):
                    self.resyncs += 1
        except Exception as error:  # the bench reports a tab closed under it
            self.closed = error


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


def record_sends(sent: list[tuple[str, float]]) -> None:
    """Note when the runner sends each delta (turn, monotonic time): the coalescing as sent."""
    from agent.core import events

    original = events.answer_delta

    def noted(conversation_id: Any, turn_id: Any, round_number: int, text: str) -> None:
        sent.append((str(turn_id), time.monotonic()))
        original(conversation_id, turn_id, round_number, text)

    events.answer_delta = noted


def open_chat() -> tuple[Any, str]:
    """The bench user's session and a fresh chat of it."""
    from agent import conversations

    ref = harness.login(harness.bench_user(USERNAME))
    chat = conversations.create_conversation(ref, {"title": "bench: stream"}, impersonated=False)
    return ref, str(chat.pk)


def run_streamed_turn(ref: Any, chat: str, server: Any, text: str, chunk_delay: float) -> tuple[str, list[float]]:
    """One turn answering ``text`` word by word, run here; its id and when each word's chunk was written."""
    from django.db import connection

    from agent import turns
    from agent.models import Turn
    from agent.tasks import run_turn
    from tests.support.model_server import answer

    server.push(answer(text, chunk_delay=chunk_delay))
    turn = turns.start(ref, chat, QUESTION, impersonated=False)
    mark = len(server.chunk_times)
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    connection.close()
    assert turn.status == Turn.Status.FINISHED, (turn.status, turn.end_reason)
    assert server.requests[-1].get("stream"), "the endpoint was not asked to stream"
    pieces = len(re.findall(r"\s*\S+", text))
    return str(turn.pk), server.chunk_times[mark : mark + pieces]


@dataclass
class Latency:
    tabs: int
    expected: int
    latencies: list[float] = field(default_factory=list)
    unmatched: int = 0
    resyncs: int = 0
    closed: int = 0
    redis_cpu: float = 0.0  # Redis's CPU seconds while the case's turns ran


def redis_cpu() -> float:
    """CPU seconds the Redis server has used so far (``INFO cpu``), user and system: the whole
    server's, so other work on the same Redis shows up here too."""
    import redis

    info = redis.Redis.from_url(os.environ["REDIS_URL"]).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def with_tabs(servers: Daphnes, count: int) -> tuple[Any, str, list[DraftTab]]:
    ref, chat = await asyncio.to_thread(open_chat)
    tabs = [DraftTab(servers.ports[0], ref.session_key, chat) for _ in range(count)]
    await open_all(tabs)
    await asyncio.sleep(1.5)  # past the connect-time checks: the timed part pays for its own
    return ref, chat, tabs


async def latency_case(servers: Daphnes, server: Any, count: int, args: argparse.Namespace) -> Latency:
    ref, chat, tabs = await with_tabs(servers, count)
    text = words(args.words)
    pieces = re.findall(r"\s*\S+", text)
    completed_by = {"".join(pieces[: n + 1]): n for n in range(len(pieces))}
    result = Latency(count, args.turns * len(pieces) * count)
    cpu_before = redis_cpu()
    for _ in range(args.turns):
        turn, written = await asyncio.to_thread(run_streamed_turn, ref, chat, server, text, args.chunk_ms / 1000)
        await asyncio.sleep(0.3)  # the last frames
        for tab in tabs:
            for delta_turn, delta_text, read_at in tab.deltas:
                if delta_turn != turn:
                    continue
                if delta_text in completed_by:
                    result.latencies.append(read_at - written[completed_by[delta_text]])
                else:
                    result.unmatched += 1
    result.redis_cpu = redis_cpu() - cpu_before
    result.resyncs = sum(t.resyncs for t in tabs)
    result.closed = sum(t.closed is not None for t in tabs)
    await asyncio.gather(*(tab.close() for tab in tabs))
    return result


@dataclass
class Coalescing:
    duration: float = 0.0
    per_tab: list[int] = field(default_factory=list)
    read_gaps: list[float] = field(default_factory=list)
    sent_gaps: list[float] = field(default_factory=list)
    streams: int = 0


async def coalescing_case(
    servers: Daphnes, server: Any, sent: list[tuple[str, float]], args: argparse.Namespace
) -> Coalescing:
    ref, chat, tabs = await with_tabs(servers, args.fast_tabs)
    result = Coalescing()
    for _ in range(args.fast_turns):
        turn, written = await asyncio.to_thread(
            run_streamed_turn, ref, chat, server, words(args.fast_words), args.fast_chunk_ms / 1000
        )
        await asyncio.sleep(0.3)
        result.streams += 1
        result.duration += written[-1] - written[0]
        for tab in tabs:
            read = [at for delta_turn, _text, at in tab.deltas if delta_turn == turn]
            result.per_tab.append(len(read))
            result.read_gaps += [b - a for a, b in pairwise(read)]
        times = [at for sent_turn, at in sent if sent_turn == turn]
        result.sent_gaps += [b - a for a, b in pairwise(times)]
    await asyncio.gather(*(tab.close() for tab in tabs))
    return result


async def socket_cases(server: Any, args: argparse.Namespace) -> tuple[list[Latency], Coalescing]:
    sent: list[tuple[str, float]] = []
    record_sends(sent)
    with Daphnes(1, args.port) as servers:
        latencies = [await latency_case(servers, server, count, args) for count in args.tabs]
        coalescing = await coalescing_case(servers, server, sent, args)
    return latencies, coalescing


def report_sockets(
    latencies: list[Latency], coalescing: Coalescing, interval_ms: int, args: argparse.Namespace
) -> None:
    print(
        f"\n1. model chunk → delta frame in a tab ({args.words} words a turn, one chunk every {args.chunk_ms:g} ms, "
        f"{args.turns} turns a case; from the chunk's write to the tab's read, one monotonic clock)"
    )
    head = (
        f"{'tabs':>6}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'frames':>18}{'unmatched':>11}{'resyncs':>9}{'closed':>8}"
        f"{'Redis CPU µs/frame':>20}"
    )
    print(head)
    print("-" * len(head))
    for r in latencies:
        print(
            f"{r.tabs:>6}{harness.ms(harness.median(r.latencies)):>9}{harness.ms(harness.pct(r.latencies, 95)):>9}"
            f"{harness.ms(max(r.latencies, default=float('nan'))):>9}"
            f"{f'{len(r.latencies):,} of {r.expected:,}':>18}{r.unmatched:>11}{r.resyncs:>9}{r.closed:>8}"
            f"{r.redis_cpu / max(len(r.latencies), 1) * 1e6:>20.0f}"
        )
    print("  (Redis CPU per delta frame a tab read, over the case's turns: the whole server's, so other work shows)")
    for r in latencies:
        ok = harness.median(r.latencies) * 1000 <= TARGET_P50_MS and len(r.latencies) == r.expected
        print(f"  {r.tabs} tab(s): p50 ≤ {TARGET_P50_MS:g} ms, a frame per chunk: {harness.verdict(ok)}")

    c = coalescing
    duration = c.duration / max(c.streams, 1)
    most = int(duration * 1000 // interval_ms) + 1
    print(
        f"\n2. coalescing ({args.fast_words} words, one chunk every {args.fast_chunk_ms:g} ms, {c.streams} stream(s), "
        f"{args.fast_tabs} tab(s); STREAM_INTERVAL_MS = {interval_ms})"
    )
    print(f"  stream's duration (first to last word)    {duration * 1000:.0f} ms")
    print(f"  deltas a tab got per stream               {min(c.per_tab)}-{max(c.per_tab)} (at most {most} allowed)")
    print(
        f"  gap between deltas as the tab read them   min {harness.ms(min(c.read_gaps))} ms, "
        f"median {harness.ms(harness.median(c.read_gaps))} ms"
    )
    print(
        f"  gap between the runner's sends            min {harness.ms(min(c.sent_gaps))} ms, "
        f"median {harness.ms(harness.median(c.sent_gaps))} ms"
    )
    ok = min(c.sent_gaps) * 1000 >= interval_ms and max(c.per_tab) <= most
    print(f"  at most one delta per STREAM_INTERVAL_MS (as sent, and counted per tab): {harness.verdict(ok)}")


@dataclass
class Side:
    """One side of the comparison: its endpoint setting, its turns' figures, its stream reads."""

    streaming: bool
    variant: overhead.Variant
    stream_reads: list[float] = field(default_factory=list)
    connections: int = 0  # the model server accepted, over the timed turns


def nonmodel_side_by_side(server: Any, turns: int, warmup: int) -> tuple[Side, Side, float]:
    """``turn_overhead``'s turns, streaming on and off alternating, each in its own short chat."""
    from agent.ai import client as ai_client
    from agent.models import Conversation, Endpoint

    with contextlib.redirect_stdout(io.StringIO()):  # its user and notes only: it makes no chats here
        user, note_ids, _short, _long = overhead.prepare(0, 0)
    count = turns + warmup
    earlier = [overhead.short_history(i) for i in range(count)]
    sides = []
    for streaming in (True, False):
        chats = []
        for number in earlier:
            chat = Conversation.objects.create(user=user, title=f"bench: stream {number} earlier")
            harness.fill_messages(chat.pk, number, chars=300)
            chats.append(chat)
        sides.append(Side(streaming, overhead.Variant(f"streaming {'on' if streaming else 'off'}", chats, earlier)))
    on, off = sides

    reads: list[float] = []
    original_read_stream = ai_client._read_stream

    def timed_read_stream(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original_read_stream(*args, **kwargs)
        finally:
            reads.append(time.perf_counter() - began)

    ai_client._read_stream = timed_read_stream
    endpoint = Endpoint.objects.get(name="bench-scripted")
    ref = harness.login(user)
    clock = harness.QueryClock()
    holder = [overhead.Probe()]
    overhead.install(lambda: holder[0], clock)
    busy = harness.BusyCores()
    with clock.installed():
        for i in range(count):
            for side in (on, off) if i % 2 == 0 else (off, on):
                Endpoint.objects.filter(pk=endpoint.pk).update(supports_streaming=side.streaming)
                del reads[:]
                connections = server.connections
                timed = i >= warmup
                variant = side.variant if timed else None  # the demo's API tools, as the site offers them
                overhead.run_one(ref, side.variant.chats[i], note_ids, server, clock, holder, variant, "api")
                assert all(bool(r.get("stream")) == side.streaming for r in server.requests[-3:])
                if timed:
                    side.stream_reads += reads
                    side.connections += server.connections - connections
    Endpoint.objects.filter(pk=endpoint.pk).update(supports_streaming=True)
    return on, off, busy.since()


def report_nonmodel(on: Side, off: Side, cores: float, turns: int) -> None:
    a, b = on.variant, off.variant

    def p50(values: list[float]) -> str:
        return harness.ms(harness.median(values))

    def p95(values: list[float]) -> str:
        return harness.ms(harness.pct(values, 95))

    rows: list[tuple[str, Any]] = [
        ("non-model per round p50 / p95 (ms)", lambda s: f"{p50(s.variant.rounds())} / {p95(s.variant.rounds())}"),
        ("  round 1 / 2 / 3 p50 (ms)", lambda s: " / ".join(p50(s.variant.nonmodel[r]) for r in overhead.ROUNDS)),
        ("turn's non-model / 3, p50 (ms)", lambda s: p50(s.variant.per_turn)),
        (
            "our statements, round 1 / 2 / 3 (median)",
            lambda s: " / ".join(f"{harness.median(s.variant.ours[r]):.0f}" for r in overhead.ROUNDS),
        ),
        (
            "CPU of the turn's thread per round p50 (ms)",
            lambda s: p50([v for r in overhead.ROUNDS for v in s.variant.cpu[r]]),
        ),
        ("HTTP send per call p50 (ms)", lambda s: p50(s.variant.http)),
        ("  new connections to the model per call", lambda s: f"{s.connections / (3 * turns):.2f}"),
        ("stream read per call p50 / p95 (ms)", lambda s: f"{p50(s.stream_reads)} / {p95(s.stream_reads)}"),
        ("whole run_turn p50 (ms)", lambda s: p50(s.variant.turn)),
    ]
    width = 46
    print(
        f"\n3. non-model time per round, streaming on and off alternating ({turns} timed turns each, short chats "
        f"of 20-92 messages, run_turn in this process; the machine's busy cores: {cores:.2f} of {os.cpu_count()})"
    )
    print(
        "  per round as bench/turn_overhead.py: its window minus the SDK's HTTP send. Streaming, that send ends at\n"
        "  the response's headers, so reading the stream (the SSE parse, the chunks, the draft) counts as non-model."
    )
    print(f"\n{'':<{width}}{a.name:>24}{b.name:>24}")
    print("-" * (width + 48))
    for label, value in rows:
        print(f"{label:<{width}}{value(on):>24}{value(off):>24}")
    ratio50 = harness.median(a.rounds()) / harness.median(b.rounds())
    ratio95 = harness.pct(a.rounds(), 95) / harness.pct(b.rounds(), 95)
    diff = harness.median(a.rounds()) - harness.median(b.rounds())
    flat = diff <= max(0.001, 0.2 * harness.median(b.rounds()))
    print(f"\n  on / off: p50 {ratio50:.2f}× ({diff * 1000:+.2f} ms), p95 {ratio95:.2f}×")
    print(f"  does not grow with streaming on (p50 within 20% or 1 ms): {harness.verdict(flat)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tabs", type=lambda s: [int(n) for n in s.split(",") if n], default=[1, 10])
    parser.add_argument("--turns", type=int, default=3, help="streamed turns per latency case")
    parser.add_argument("--words", type=int, default=40, help="chunks (words) per streamed answer")
    parser.add_argument("--chunk-ms", type=float, default=150)
    parser.add_argument("--fast-words", type=int, default=400)
    parser.add_argument("--fast-chunk-ms", type=float, default=7.5)
    parser.add_argument("--fast-turns", type=int, default=2)
    parser.add_argument("--fast-tabs", type=int, default=1)
    parser.add_argument("--overhead-turns", type=int, default=200, help="timed turns per side in part 3")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--port", type=int, default=18950)
    args = parser.parse_args()
    os.environ.setdefault("AGENT_LOG_LEVEL", "WARNING")  # one INFO line per ended turn would flood the output
    raise_open_files()
    harness.setup()
    from django.db import connection

    from agent.core.conf import agent_settings
    from tests.support.model_server import ScriptedModelServer

    server = ScriptedModelServer()
    server.start()
    try:
        endpoint = overhead.point_endpoint_at(server.base_url)
        endpoint.supports_streaming = True
        endpoint.save(update_fields=["supports_streaming"])
        overhead.purge_queue()
        print(
            f"daphne on {args.port}, Redis {os.environ['REDIS_URL']}, PostgreSQL {connection.settings_dict['NAME']}; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        connection.close()
        began = time.monotonic()
        latencies, coalescing = asyncio.run(socket_cases(server, args))
        report_sockets(latencies, coalescing, agent_settings.STREAM_INTERVAL_MS, args)
        on, off, cores = nonmodel_side_by_side(server, args.overhead_turns, args.warmup)
        report_nonmodel(on, off, cores, args.overhead_turns)
        print(f"\nwhole run: {time.monotonic() - began:.0f} s")
    finally:
        server.stop()
        overhead.purge_queue()


if __name__ == "__main__":
    main()
