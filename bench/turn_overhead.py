"""Non-model time per round of a turn (SPEC §14), on PostgreSQL and Redis.

200 turns of 3 rounds (two reads, notes_search and notes_read, in rounds 1
and 2; the answer in round 3) against the scripted model server, each run by
``agent.tasks.run_turn`` in this process: once in empty chats and once in
chats with 400 earlier messages, interleaved. Timing shims wrap the runner
and the SDK client from outside; ``agent/`` is not changed.

Run: ``.venv/bin/python bench/turn_overhead.py`` (``--turns N``).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import harness

USERNAME = "bench_turns"
EARLIER = 400
QUESTION = "What do my notes say about milk and bread?"


@dataclass
class Probe:
    """What the shims saw during one turn (perf_counter seconds)."""

    rounds: dict[int, tuple[float, float]] = field(default_factory=dict)
    http: list[tuple[float, float]] = field(default_factory=list)  # the SDK's HTTP send: network and server
    create: list[tuple[float, float]] = field(default_factory=list)  # the whole chat.completions.create
    builds: list[tuple[float, list[dict[str, Any]]]] = field(default_factory=list)  # request_messages: time, result
    history: list[float] = field(default_factory=list)
    events: list[tuple[float, float]] = field(default_factory=list)  # channel-layer sends after commit
    commits: list[tuple[float, float]] = field(default_factory=list)  # COMMIT (not seen by execute_wrapper)


def install(probe_of: Callable[[], Probe], clock: harness.QueryClock) -> None:
    """Wrap the runner's round and request build, the history read, event sends and the SDK client."""
    from agent import events
    from agent.ai import client as ai_client
    from agent.turns import history, runner

    original_round = runner.TurnRunner.round

    def timed_round(self: Any, scope: Any, number: int, *, last: bool) -> bool:
        clock.tag = ("body", number)
        began = time.perf_counter()
        try:
            return original_round(self, scope, number, last=last)
        finally:
            probe_of().rounds[number] = (began, time.perf_counter())
            clock.tag = ("pre", number + 1)

    original_build = runner.TurnRunner.request_messages

    def timed_build(self: Any, number: int) -> list[dict[str, Any]]:
        began = time.perf_counter()
        messages = original_build(self, number)
        probe_of().builds.append((time.perf_counter() - began, messages))  # sized after the turn
        return messages

    original_load = history.load

    def timed_load(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original_load(*args, **kwargs)
        finally:
            probe_of().history.append(time.perf_counter() - began)

    original_send = events._send_rollback_unsafe

    def timed_send(group: str, event: dict[str, Any]) -> None:
        began = time.perf_counter()
        try:
            original_send(group, event)
        finally:
            probe_of().events.append((began, time.perf_counter()))

    original_client_for = ai_client._client_for
    instrumented: set[int] = set()

    def client_for(endpoint: Any) -> Any:
        client = original_client_for(endpoint)
        if id(client) not in instrumented:
            instrumented.add(id(client))
            client._send_request = spans(client._send_request, lambda: probe_of().http)
            completions = client.chat.completions
            completions.create = spans(completions.create, lambda: probe_of().create)
        return client

    from django.db import connection

    connection._commit = spans(connection._commit, lambda: probe_of().commits)  # type: ignore[attr-defined]
    runner.TurnRunner.round = timed_round
    runner.TurnRunner.request_messages = timed_build
    history.load = timed_load
    events._send_rollback_unsafe = timed_send
    ai_client._client_for = client_for


def spans(func: Callable[..., Any], into: Callable[[], list[tuple[float, float]]]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            into().append((began, time.perf_counter()))

    return timed


def inside(intervals: list[tuple[float, float]], low: float, high: float) -> float:
    return sum(end - start for start, end in intervals if low <= start and end <= high)


@dataclass
class Variant:
    name: str
    chats: list[Any]
    nonmodel: dict[int, list[float]] = field(default_factory=lambda: {1: [], 2: [], 3: []})
    queries: dict[int, list[int]] = field(default_factory=lambda: {1: [], 2: [], 3: []})
    sql: list[float] = field(default_factory=list)
    events: list[float] = field(default_factory=list)
    commits: list[float] = field(default_factory=list)
    commit_count: list[int] = field(default_factory=list)
    other: list[float] = field(default_factory=list)
    kinds: list[Counter[str]] = field(default_factory=list)
    sdk: list[float] = field(default_factory=list)
    http: list[float] = field(default_factory=list)
    build: list[float] = field(default_factory=list)
    build_bytes: list[int] = field(default_factory=list)
    build_messages: list[int] = field(default_factory=list)
    history: list[float] = field(default_factory=list)
    setup: list[float] = field(default_factory=list)
    setup_queries: list[int] = field(default_factory=list)
    ending: list[float] = field(default_factory=list)
    ending_queries: list[int] = field(default_factory=list)
    turn: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    start_queries: list[int] = field(default_factory=list)

    def rounds(self) -> list[float]:
        return [v for r in (1, 2, 3) for v in self.nonmodel[r]]

    def round_queries(self) -> list[int]:
        return [v for r in (1, 2, 3) for v in self.queries[r]]


def prepare(turns: int, warmup: int) -> tuple[Any, list[int], Variant, Variant]:
    """The user with the notes permissions and a few notes, and one chat per turn of each variant."""
    from agent.models import Conversation
    from agent_project.notes.models import Note

    user = harness.bench_user(USERNAME, "notes.view_note", "notes.add_note", "notes.change_note")
    if Note.objects.filter(owner=user).count() < 5:
        for title, body in [("Milk", "Buy milk on Friday."), ("Bread", "Rye bread from the bakery."),
                            ("Milk prices", "Milk went up 10%."), ("Bread recipe", "Flour, water, salt, yeast."),
                            ("Shopping", "Milk, bread, eggs.")]:
            Note.objects.create(owner=user, title=title, body=body * 20)
    note_ids = list(Note.objects.filter(owner=user).order_by("pk").values_list("pk", flat=True)[:2])
    count = turns + warmup
    empty = [Conversation.objects.create(user=user, title="bench: empty") for _ in range(count)]
    long = [Conversation.objects.create(user=user, title=f"bench: {EARLIER} earlier") for _ in range(count)]
    began = time.monotonic()
    for chat in long:
        harness.fill_messages(chat.pk, EARLIER, chars=300)
    print(f"filled {count} chats with {EARLIER} earlier messages each in {time.monotonic() - began:.1f} s")
    return user, note_ids, Variant("empty chat", empty), Variant(f"{EARLIER} earlier messages", long)


def point_endpoint_at(server: Any) -> Any:
    from agent.models import AgentSettings, Endpoint

    endpoint, _created = Endpoint.objects.update_or_create(
        name="bench-scripted",
        defaults={"base_url": server.base_url, "api_key": "sk-bench", "model": "scripted-model",
                  "input_price_per_mtok": 2, "output_price_per_mtok": 8, "timeout_s": 5, "enabled": True},
    )
    site = AgentSettings.current()
    site.enabled = True
    site.default_endpoint = endpoint
    site.save()
    return endpoint


def purge_queue() -> None:
    """Turns ``start`` queued on the bench broker: run here in-process, no worker must take them."""
    from agent_project.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(app.conf.task_default_queue)


def run_one(ref: Any, chat: Any, note_ids: list[int], server: Any, clock: harness.QueryClock,
            holder: list[Probe], variant: Variant | None) -> None:
    """One turn: start it, run it here, and file its figures under ``variant`` (None: warm-up)."""
    from agent import turns
    from agent.models import Message, Turn
    from agent.tasks import run_turn
    from tests.model_server import answer, tool_calls

    first, second = note_ids
    server.push(
        tool_calls(("notes_search", {"query": "milk"}), ("notes_read", {"note_id": first})),
        tool_calls(("notes_search", {"query": "bread"}), ("notes_read", {"note_id": second})),
        answer("Your notes say to buy milk on Friday and rye bread from the bakery."),
    )
    clock.tag = "start"
    mark = clock.mark()
    began = time.perf_counter()
    turn = turns.start(ref, chat.pk, QUESTION, impersonated=False)
    started = time.perf_counter()
    start_queries = len(clock.queries) - mark
    probe = holder[0] = Probe()
    clock.tag = "setup"
    mark = clock.mark()
    t0 = time.perf_counter()
    run_turn(str(turn.pk))
    t1 = time.perf_counter()
    clock.tag = None
    queries = clock.queries[mark:]

    turn.refresh_from_db()
    outcomes = list(Message.objects.filter(turn=turn).order_by("seq").values_list("role", "tool_outcome"))
    expected = [("user", "")] + [("assistant", ""), ("tool", "ok"), ("tool", "ok")] * 2 + [("assistant", "")]
    assert turn.status == Turn.Status.FINISHED, (turn.status, turn.end_reason)
    assert outcomes == expected, outcomes
    assert sorted(probe.rounds) == [1, 2, 3] and len(probe.http) == 3, (probe.rounds, probe.http)
    if variant is None:
        return

    ends = {r: probe.rounds[r][1] for r in (1, 2, 3)}
    windows = {1: (t0, ends[1]), 2: (ends[1], ends[2]), 3: (ends[2], t1)}
    tags: dict[int, set[Any]] = {
        1: {"setup", ("body", 1)}, 2: {("pre", 2), ("body", 2)}, 3: {("pre", 3), ("body", 3), ("pre", 4)},
    }
    for r, (low, high) in windows.items():
        nonmodel = high - low - inside(probe.http, low, high)
        sql = sum(q[2] for q in queries if q[3] in tags[r])
        sent = inside(probe.events, low, high)
        sdk = inside(probe.create, low, high) - inside(probe.http, low, high)
        committed = inside(probe.commits, low, high)
        variant.nonmodel[r].append(nonmodel)
        variant.queries[r].append(sum(1 for q in queries if q[3] in tags[r]))
        variant.sql.append(sql)
        variant.events.append(sent)
        variant.sdk.append(sdk)
        variant.commits.append(committed)
        variant.commit_count.append(sum(1 for c0, c1 in probe.commits if low <= c0 and c1 <= high))
        variant.other.append(nonmodel - sql - sent - sdk - committed)
    variant.kinds.append(Counter(kind(q[0]) for q in queries))
    variant.http += [end - start for start, end in probe.http]
    for seconds, messages in probe.builds:
        variant.build.append(seconds)
        variant.build_bytes.append(len(json.dumps(messages, ensure_ascii=False).encode()))
        variant.build_messages.append(len(messages))
    variant.history += probe.history
    variant.setup.append(probe.rounds[1][0] - t0)
    variant.setup_queries.append(sum(1 for q in queries if q[3] == "setup"))
    variant.ending.append(t1 - ends[3])
    variant.ending_queries.append(sum(1 for q in queries if q[3] == ("pre", 4)))
    variant.turn.append(t1 - t0)
    variant.start.append(started - began)
    variant.start_queries.append(start_queries)


def kind(sql: str) -> str:
    """A query's statement and table, e.g. ``SELECT agent_lock FOR UPDATE``."""
    words = sql.split()
    verb = words[0].upper() if words else "?"
    if verb in {"SAVEPOINT", "RELEASE", "ROLLBACK"}:
        return verb
    table = "?"
    for match in re.finditer(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', sql):
        if sql.count("(", 0, match.start()) == sql.count(")", 0, match.start()):  # not in a subquery
            table = match.group(1)
            break
    if verb == "SELECT" and sql.upper().startswith("SELECT COUNT("):
        verb = "SELECT COUNT"
    return f"{verb} {table}" + (" FOR UPDATE" if "FOR UPDATE" in sql else "")


def report(a: Variant, b: Variant) -> None:
    def p50(values: list[float]) -> str:
        return harness.ms(harness.median(values))

    def p95(values: list[float]) -> str:
        return harness.ms(harness.pct(values, 95))

    rows: list[tuple[str, Callable[[Variant], str]]] = [
        ("non-model per round p50 (ms)", lambda v: p50(v.rounds())),
        ("non-model per round p95 (ms)", lambda v: p95(v.rounds())),
        ("  round 1 p50 / p95 (with turn setup)", lambda v: f"{p50(v.nonmodel[1])} / {p95(v.nonmodel[1])}"),
        ("  round 2 p50 / p95", lambda v: f"{p50(v.nonmodel[2])} / {p95(v.nonmodel[2])}"),
        ("  round 3 p50 / p95 (with turn end)", lambda v: f"{p50(v.nonmodel[3])} / {p95(v.nonmodel[3])}"),
        ("queries per round median / max",
         lambda v: f"{harness.median(v.round_queries()):.0f} / {max(v.round_queries())}"),
        ("  by round 1 / 2 / 3 (median)",
         lambda v: " / ".join(f"{harness.median(v.queries[r]):.0f}" for r in (1, 2, 3))),
        ("  of which SQL (client-timed) p50 (ms)", lambda v: p50(v.sql)),
        ("  of which event sends p50 (ms)", lambda v: p50(v.events)),
        ("  of which COMMITs p50 (ms) / count", lambda v: f"{p50(v.commits)} / {harness.median(v.commit_count):.0f}"),
        ("  of which SDK build+parse p50 (ms)", lambda v: p50(v.sdk)),
        ("  of which other Python p50 (ms)", lambda v: p50(v.other)),
        ("turn setup p50 (ms) / queries (claim..round 1)",
         lambda v: f"{p50(v.setup)} / {harness.median(v.setup_queries):.0f}"),
        ("  of which history.load p50 (ms)", lambda v: p50(v.history)),
        ("turn end p50 (ms) / queries (after round 3)",
         lambda v: f"{p50(v.ending)} / {harness.median(v.ending_queries):.0f}"),
        ("request build p50 / p95 (ms)", lambda v: f"{p50(v.build)} / {p95(v.build)}"),
        ("request JSON median / max (KiB)",
         lambda v: f"{harness.median(v.build_bytes) / 1024:.1f} / {max(v.build_bytes) / 1024:.1f}"),
        ("request messages median / max",
         lambda v: f"{harness.median(v.build_messages):.0f} / {max(v.build_messages)}"),
        ("HTTP to model per call p50 (ms)", lambda v: p50(v.http)),
        ("whole run_turn p50 / p95 (ms)", lambda v: f"{p50(v.turn)} / {p95(v.turn)}"),
        ("turns per second (run_turn only)", lambda v: f"{len(v.turn) / sum(v.turn):.1f}"),
        ("turns per second (with start())", lambda v: f"{len(v.turn) / (sum(v.turn) + sum(v.start)):.1f}"),
        ("start() p50 (ms) / queries", lambda v: f"{p50(v.start)} / {harness.median(v.start_queries):.0f}"),
    ]
    width = 46
    print("\nper round = from the end of the previous round (turn start for round 1) to the end of this one "
          "(turn end for round 3), minus the SDK's HTTP send to the model")
    print(f"\n{'':<{width}}{a.name:>22}{b.name:>24}")
    print("-" * (width + 46))
    for label, value in rows:
        print(f"{label:<{width}}{value(a):>22}{value(b):>24}")

    print(f"\nqueries per turn by statement ({a.name} / {b.name}, median over turns):")
    names = sorted({k for c in a.kinds + b.kinds for k in c}, key=lambda k: -harness.median([c[k] for c in a.kinds]))
    for name in names:
        counts = harness.median([c[name] for c in a.kinds]), harness.median([c[name] for c in b.kinds])
        print(f"  {name:<44}{counts[0]:>5.0f}{counts[1]:>6.0f}")
    print(f"  {'total':<44}{harness.median([sum(c.values()) for c in a.kinds]):>5.0f}"
          f"{harness.median([sum(c.values()) for c in b.kinds]):>6.0f}")

    print("\ntargets (SPEC §14: ≤ 25 queries per round, non-model p50 ≤ 10 ms, p95 ≤ 40 ms):")
    for v in (a, b):
        checks = [
            ("≤ 25 queries per round", max(v.round_queries()) <= 25),
            ("p50 ≤ 10 ms", harness.median(v.rounds()) <= 0.010),
            ("p95 ≤ 40 ms", harness.pct(v.rounds(), 95) <= 0.040),
        ]
        print(f"  {v.name:<24}" + "   ".join(f"{label}: {harness.verdict(ok)}" for label, ok in checks))
    diff = harness.median(b.rounds()) - harness.median(a.rounds())
    ratio = harness.median(b.rounds()) / harness.median(a.rounds())
    flat = diff <= max(0.001, 0.2 * harness.median(a.rounds()))
    print(f"  flat with the chat's length (p50 within 20% or 1 ms): {harness.verdict(flat)} "
          f"({EARLIER} earlier messages: {ratio:.2f}×, {diff * 1000:+.2f} ms)")


def profile(ref: Any, chats: list[Any], note_ids: list[int], server: Any, clock: harness.QueryClock,
            holder: list[Probe]) -> None:
    """cProfile over a few more turns (timings under a profiler are inflated; compare shares only)."""
    profiler = cProfile.Profile()
    with clock.installed():
        profiler.enable()
        for chat in chats:
            run_one(ref, chat, note_ids, server, clock, holder, None)
        profiler.disable()
    print(f"\nprofile of {len(chats)} more turns, agent/ functions by cumulative time:")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(r"/agent/", 30)
    print("all functions by own time:")
    stats.sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per variant")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--profile", action="store_true",
                        help="afterwards, profile 20 more turns and print the agent's costliest functions")
    args = parser.parse_args()
    os.environ.setdefault("AGENT_LOG_LEVEL", "WARNING")  # one INFO line per ended turn would flood the output
    harness.setup()
    from django.db import connection

    from tests.model_server import ScriptedModelServer

    server = ScriptedModelServer()
    server.start()
    try:
        point_endpoint_at(server)
        user, note_ids, empty, long = prepare(args.turns, args.warmup)
        ref = harness.login(user)
        purge_queue()
        clock = harness.QueryClock()
        holder = [Probe()]
        install(lambda: holder[0], clock)
        print(f"{connection.vendor} {getattr(connection, 'pg_version', '?')}, channel layer {os.environ['REDIS_URL']}; "
              f"{args.turns} timed turns per variant after {args.warmup} warm-up, interleaved; one worker, in-process")
        began = time.monotonic()
        with clock.installed():
            for i in range(args.warmup + args.turns):
                timed = i >= args.warmup
                run_one(ref, empty.chats[i], note_ids, server, clock, holder, empty if timed else None)
                run_one(ref, long.chats[i], note_ids, server, clock, holder, long if timed else None)
        print(f"ran {2 * (args.warmup + args.turns)} turns in {time.monotonic() - began:.1f} s")
        report(empty, long)
        if args.profile:
            profile(ref, empty.chats[-20:], note_ids, server, clock, holder)
    finally:
        server.stop()
        purge_queue()


if __name__ == "__main__":
    main()
