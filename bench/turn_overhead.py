"""Non-model time per round of a turn, on PostgreSQL and Redis.

Turns of 3 rounds (two reads in rounds 1 and 2, two tool calls each; the
answer in round 3), each run by ``agent.tasks.run_turn`` in this process, in
short chats (20-92 earlier messages, as the peer's first turns) and in chats
with 400 earlier messages, interleaved. The model is a scripted server: the
tests' own in this process, or with ``--server`` any OpenAI-compatible one
such as the peer bench's ``scripted_llm.py``. The bench's site lets sessions
only read.

The tools are, by default, two plain reads shaped as the peer bench's:
``note_title`` and ``note_text``, each one small query for the user's n-th
note (``number``, 1-5), so both sides' tools do the same work. With
``--tools api`` they are the demo's own, built from its notes API
(``notes_search`` and ``notes_read``, each call a dispatch of the site's DRF
view), which shows what a site's API costs a round. The tests' server is
scripted with arguments that answer, and every call must come back ``ok``; an
external server picks its own calls and arguments (``scripted_llm.py`` calls
the first tools offered with made-up values: an integer 1-5 for ``number``),
so with ``--server`` and ``--tools api`` the user is offered notes_search
alone, and the outcomes are counted and printed, not checked. Timing shims wrap
the runner and the SDK client from outside; ``agent/`` is not changed.

Run: ``.venv/bin/python bench/turn_overhead.py`` (``--turns N``, ``--profile``,
``--server URL``, ``--tools plain|api``, ``--json FILE``).
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

USERNAME = "bench_reads"  # holds notes.view_note only: the tools it sees are reads
LONG = 400
QUESTION = "What do my notes say about milk and bread?"
ROUNDS = (1, 2, 3)
PLAIN_TOOLS = ("note_title", "note_text")  # --tools plain (the default), as the peer bench's
API_TOOLS = ("notes_search", "notes_read")  # --tools api: the demo's, built from its notes API


def declare_plain_tools() -> None:
    """The peer bench's tools in our terms: two reads of the user's n-th note, one small query each
    (the peer's ``get_item`` and ``get_stock`` each read one row by id). The demo's API tools go."""
    from agent.tools import agent_tool, registry
    from agent_project.notes.models import Note

    for tool in registry.all():
        registry.unregister(tool.name)
    number = {"type": "integer", "minimum": 1, "maximum": 5, "description": "Which of the user's notes, 1-5."}
    parameters = {"type": "object", "properties": {"number": number}, "required": ["number"]}

    def reader(field_name: str) -> Callable[..., dict[str, Any]]:
        def read(ctx: Any, number: int) -> dict[str, Any]:
            rows = Note.objects.filter(owner=ctx.user).order_by("pk").values("id", field_name)[number - 1 : number]
            return next(iter(rows), {"found": False})

        return read

    for name, field_name, what in (("note_title", "title", "title"), ("note_text", "body", "text")):
        description = f"The {what} of one of the user's notes."
        agent_tool(name=name, description=description, permission="notes.view_note", parameters=parameters)(
            reader(field_name)
        )


def short_history(index: int) -> int:
    """Earlier messages of the ``index``-th short chat: 20, 28, ... 92, as the peer's turns 1-10."""
    return 20 + 8 * (index % 10)


@dataclass
class Probe:
    """What the shims saw during one turn (perf_counter seconds)."""

    rounds: dict[int, tuple[float, float, float]] = field(default_factory=dict)  # start, end, thread CPU at end
    http: list[tuple[float, float]] = field(default_factory=list)  # the SDK's HTTP send: network and server
    create: list[tuple[float, float]] = field(default_factory=list)  # the client's whole POST
    builds: list[tuple[float, list[dict[str, Any]]]] = field(default_factory=list)  # request_messages: time, result
    history: list[float] = field(default_factory=list)
    events: list[tuple[float, float]] = field(default_factory=list)  # channel-layer sends after commit
    commits: list[tuple[float, float]] = field(default_factory=list)  # COMMIT (not seen by execute_wrapper)


def install(probe_of: Callable[[], Probe], clock: harness.QueryClock) -> None:
    """Wrap the runner's round, tool execution and request build, the history read, event sends
    and the SDK client."""
    from agent.ai import client as ai_client
    from agent.core import events
    from agent.turns import history, runner

    original_round = runner.TurnRunner.round

    def timed_round(self: Any, scope: Any, number: int, *, last: bool) -> bool:
        clock.tag = ("body", number)
        began = time.perf_counter()
        try:
            return original_round(self, scope, number, last=last)
        finally:
            probe_of().rounds[number] = (began, time.perf_counter(), time.thread_time())
            clock.tag = ("pre", number + 1)

    original_execute = runner.TurnRunner.execute

    def tagged_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer, clock.tag = clock.tag, ("tool", clock.tag[1])  # the tool's own queries are not ours
        try:
            return original_execute(self, *args, **kwargs)
        finally:
            clock.tag = outer

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

    original_client_for = ai_client.client_for
    instrumented: set[int] = set()

    def client_for(endpoint: Any) -> Any:
        client = original_client_for(endpoint)
        if id(client) not in instrumented:
            instrumented.add(id(client))
            client._send_request = spans(client._send_request, lambda: probe_of().http)
            client.post = spans(client.post, lambda: probe_of().create)
        return client

    from django.db import connection

    connection._commit = spans(connection._commit, lambda: probe_of().commits)  # type: ignore[attr-defined]
    runner.TurnRunner.round = timed_round
    runner.TurnRunner.execute = tagged_execute
    runner.TurnRunner.request_messages = timed_build
    history.load = timed_load
    events._send_rollback_unsafe = timed_send
    ai_client.client_for = client_for


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
    earlier: list[int]
    nonmodel: dict[int, list[float]] = field(default_factory=lambda: {r: [] for r in ROUNDS})
    cpu: dict[int, list[float]] = field(default_factory=lambda: {r: [] for r in ROUNDS})
    ours: dict[int, list[int]] = field(default_factory=lambda: {r: [] for r in ROUNDS})  # our statements
    tools: dict[int, list[int]] = field(default_factory=lambda: {r: [] for r in ROUNDS})  # the tools' own
    per_turn: list[float] = field(default_factory=list)  # run_turn's non-model time / 3
    with_start: list[float] = field(default_factory=list)  # start() + run_turn, non-model, / 3
    sql: list[float] = field(default_factory=list)
    events: list[float] = field(default_factory=list)
    commits: list[float] = field(default_factory=list)
    commit_count: list[int] = field(default_factory=list)
    other: list[float] = field(default_factory=list)
    kinds: list[Counter[str]] = field(default_factory=list)
    kind_seconds: dict[str, list[float]] = field(default_factory=dict)  # each statement's client time, by kind
    sample: dict[int, list[str]] = field(default_factory=dict)  # one turn's statements, round by round
    sdk: list[float] = field(default_factory=list)
    http: list[float] = field(default_factory=list)
    build: list[float] = field(default_factory=list)
    build_bytes: list[int] = field(default_factory=list)
    build_messages: list[int] = field(default_factory=list)
    history: list[float] = field(default_factory=list)
    turn: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    start_queries: list[int] = field(default_factory=list)
    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # tool, outcome, error: timed turns

    def rounds(self) -> list[float]:
        return [v for r in ROUNDS for v in self.nonmodel[r]]

    def summary(self) -> dict[str, Any]:
        return {
            "earlier_messages": [min(self.earlier), max(self.earlier)],
            "per_round": self.rounds(),
            "per_round_by_round": {str(r): self.nonmodel[r] for r in ROUNDS},
            "cpu_by_round": {str(r): self.cpu[r] for r in ROUNDS},
            "per_turn_over_3": self.per_turn,
            "with_start_over_3": self.with_start,
            "statements_ours_by_round": {str(r): self.ours[r] for r in ROUNDS},
            "statements_tools_by_round": {str(r): self.tools[r] for r in ROUNDS},
            "tool_calls": [[*call, count] for call, count in sorted(self.calls.items())],
        }


def prepare(turns: int, warmup: int) -> tuple[Any, list[int], Variant, Variant]:
    """The bench user with a few notes, and one chat per turn of each variant, filled by SQL."""
    from agent.models import Conversation
    from agent_project.notes.models import Note

    user = harness.bench_user(USERNAME, "notes.view_note")
    if Note.objects.filter(owner=user).count() < 5:
        for title, body in [
            ("Milk", "Buy milk on Friday."),
            ("Bread", "Rye bread from the bakery."),
            ("Milk prices", "Milk went up 10%."),
            ("Bread recipe", "Flour, water, salt, yeast."),
            ("Shopping", "Milk, bread, eggs."),
        ]:
            Note.objects.create(owner=user, title=title, body=body * 20)
    note_ids = list(Note.objects.filter(owner=user).order_by("pk").values_list("pk", flat=True)[:2])
    count = turns + warmup
    short = Variant("short chat (20-92)", [], [short_history(i) for i in range(count)])
    long = Variant(f"{LONG} earlier messages", [], [LONG] * count)
    began = time.monotonic()
    for variant in (short, long):
        for earlier in variant.earlier:
            chat = Conversation.objects.create(user=user, title=f"bench: {earlier} earlier")
            harness.fill_messages(chat.pk, earlier, chars=300)
            variant.chats.append(chat)
    print(f"made {2 * count} chats with their earlier messages in {time.monotonic() - began:.1f} s")
    return user, note_ids, short, long


def point_endpoint_at(base_url: str) -> Any:
    from agent.models import AgentSettings, Endpoint

    endpoint, _created = Endpoint.objects.update_or_create(
        name="bench-scripted",
        defaults={
            "base_url": base_url,
            "api_key": "sk-bench",
            "model": "scripted-model",
            "input_price_per_mtok": 2,
            "output_price_per_mtok": 8,
            "timeout_s": 5,
            "enabled": True,
            "supports_streaming": False,  # whole answers, as the peer's scripted server gives (stream.py: both)
        },
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


def script(server: Any, note_ids: list[int], tools: str) -> None:
    """The in-process server's replies for one turn (an external server decides by itself)."""
    from tests.support.model_server import answer, tool_calls

    if server is None:
        return
    if tools == "plain":
        rounds = [tool_calls(("note_title", {"number": n}), ("note_text", {"number": n})) for n in (1, 2)]
    else:
        first, second = note_ids
        rounds = [
            tool_calls(("notes_search", {"search": "milk"}), ("notes_read", {"pk": first})),
            tool_calls(("notes_search", {"search": "bread"}), ("notes_read", {"pk": second})),
        ]
    server.push(*rounds, answer("Your notes say to buy milk on Friday and rye bread from the bakery."))


def run_one(
    ref: Any,
    chat: Any,
    note_ids: list[int],
    server: Any,
    clock: harness.QueryClock,
    holder: list[Probe],
    variant: Variant | None,
    tools: str,
) -> None:
    """One turn: start it, run it here, and file its figures under ``variant`` (None: warm-up)."""
    from agent import turns
    from agent.models import Message, Turn
    from agent.tasks import run_turn

    script(server, note_ids, tools)
    clock.tag = "start"
    mark = clock.mark()
    began = time.perf_counter()
    turn = turns.start(ref, chat.pk, QUESTION, impersonated=False)
    started = time.perf_counter()
    start_queries = len(clock.queries) - mark
    probe = holder[0] = Probe()
    clock.tag = "setup"
    mark = clock.mark()
    c0 = time.thread_time()
    t0 = time.perf_counter()
    run_turn(str(turn.pk))
    t1 = time.perf_counter()
    c1 = time.thread_time()
    clock.tag = None
    queries = clock.queries[mark:]

    turn.refresh_from_db()
    stored = list(
        Message.objects.filter(turn=turn)
        .order_by("seq")
        .values_list("role", "tool_name", "tool_outcome", "tool_result")
    )
    roles = [role for role, *_rest in stored]
    assert turn.status == Turn.Status.FINISHED, (turn.status, turn.end_reason)
    assert roles == ["user"] + ["assistant", "tool", "tool"] * 2 + ["assistant"], stored
    assert sorted(probe.rounds) == list(ROUNDS) and len(probe.http) == 3, (probe.rounds, probe.http)
    calls = [(name, outcome, error_of(outcome, result)) for role, name, outcome, result in stored if role == "tool"]
    if server is not None:  # our own script: both reads answer
        expected = [(name, "ok", "") for name in (PLAIN_TOOLS if tools == "plain" else API_TOOLS)] * 2
        assert calls == expected, calls
    if variant is not None:
        variant.calls.update(calls)
    if variant is None:
        return

    ends = {r: probe.rounds[r][1] for r in ROUNDS}
    windows = {1: (t0, ends[1]), 2: (ends[1], ends[2]), 3: (ends[2], t1)}
    cpu_marks = {0: c0, 1: probe.rounds[1][2], 2: probe.rounds[2][2], 3: c1}
    tags: dict[int, set[Any]] = {
        1: {"setup", ("pre", 1), ("body", 1)},
        2: {("pre", 2), ("body", 2)},
        3: {("pre", 3), ("body", 3), ("pre", 4)},
    }
    mine = {r: tags[r] | {("tool", r)} for r in ROUNDS}
    for r, (low, high) in windows.items():
        nonmodel = high - low - inside(probe.http, low, high)
        sql = sum(q[2] for q in queries if q[3] in tags[r] or q[3] == ("tool", r))
        sent = inside(probe.events, low, high)
        sdk = inside(probe.create, low, high) - inside(probe.http, low, high)
        committed = inside(probe.commits, low, high)
        variant.nonmodel[r].append(nonmodel)
        variant.cpu[r].append(cpu_marks[r] - cpu_marks[r - 1])
        variant.ours[r].append(sum(1 for q in queries if q[3] in tags[r]))
        variant.tools[r].append(sum(1 for q in queries if q[3] == ("tool", r)))
        variant.sql.append(sql)
        variant.events.append(sent)
        variant.sdk.append(sdk)
        variant.commits.append(committed)
        variant.commit_count.append(sum(1 for c0_, c1_ in probe.commits if low <= c0_ and c1_ <= high))
        variant.other.append(nonmodel - sql - sent - sdk - committed)
    if not variant.sample:
        variant.sample = {
            r: [("tool: " if q[3] == ("tool", r) else "") + kind(q[0]) for q in queries if q[3] in mine[r]]
            for r in ROUNDS
        }
    variant.kinds.append(Counter(kind(q[0]) for q in queries if not (isinstance(q[3], tuple) and q[3][0] == "tool")))
    for q in queries:
        name = ("tool: " if isinstance(q[3], tuple) and q[3][0] == "tool" else "") + kind(q[0])
        variant.kind_seconds.setdefault(name, []).append(q[2])
    http_total = sum(end - start for start, end in probe.http)
    variant.per_turn.append((t1 - t0 - http_total) / 3)
    variant.with_start.append((t1 - t0 - http_total + started - began) / 3)
    variant.http += [end - start for start, end in probe.http]
    for seconds, messages in probe.builds:
        variant.build.append(seconds)
        variant.build_bytes.append(len(json.dumps(messages, ensure_ascii=False).encode()))
        variant.build_messages.append(len(messages))
    variant.history += probe.history
    variant.turn.append(t1 - t0)
    variant.start.append(started - began)
    variant.start_queries.append(start_queries)


def error_of(outcome: str, result: Any) -> str:
    """A refused or failed call's error code (``not_found``, ...); empty for an answer."""
    return str(result.get("error", "")) if outcome != "ok" and isinstance(result, dict) else ""


def tally(calls: Counter[tuple[str, str, str]]) -> str:
    """The timed turns' tool calls by tool and outcome, e.g. ``notes_read denied (not_found) × 200``."""
    return ", ".join(
        f"{name} {outcome}{f' ({error})' if error else ''} × {count}"
        for (name, outcome, error), count in sorted(calls.items())
    )


def kind(sql: str) -> str:
    """A query's statement and table, e.g. ``SELECT agent_lock FOR UPDATE``; ours are named."""
    if sql.startswith("WITH agent_check"):
        return "store + check: " + ("the store it guards" if "agent_gate AS" in sql else "before the next step")
    if sql.startswith("WITH agent_fence"):
        return "store: lease + chat counters + message"
    if sql.startswith("WITH agent_chat"):
        return "store: chat counters + message"
    if sql.startswith("WITH agent_claimed"):
        return "claim: running + leases extended"
    words = sql.split()
    verb = words[0].upper() if words else "?"
    if verb in {"SAVEPOINT", "RELEASE", "ROLLBACK"}:
        return verb
    table = "?"
    for match in re.finditer(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', sql):
        if sql.count("(", 0, match.start()) == sql.count(")", 0, match.start()):  # not in a subquery
            table = match.group(1)
            break
    if verb == "SELECT" and table == "auth_user" and "agent_leases" in sql:
        return "check: session, rights, turn, leases, chat" + (", budget" if "agent_cap_user" in sql else "")
    if verb == "SELECT" and sql.upper().startswith("SELECT COUNT("):
        verb = "SELECT COUNT"
    return f"{verb} {table}" + (" FOR UPDATE" if "FOR UPDATE" in sql else "")


def report(a: Variant, b: Variant) -> None:
    def p50(values: list[float]) -> str:
        return harness.ms(harness.median(values))

    def p95(values: list[float]) -> str:
        return harness.ms(harness.pct(values, 95))

    def by_round(values: dict[int, list[int]]) -> str:
        return " / ".join(f"{harness.median(values[r]):.0f}" for r in ROUNDS)

    rows: list[tuple[str, Callable[[Variant], str]]] = [
        ("non-model per round p50 (ms)", lambda v: p50(v.rounds())),
        ("non-model per round p95 (ms)", lambda v: p95(v.rounds())),
        ("  round 1 p50 / p95 (with turn setup)", lambda v: f"{p50(v.nonmodel[1])} / {p95(v.nonmodel[1])}"),
        ("  round 2 p50 / p95", lambda v: f"{p50(v.nonmodel[2])} / {p95(v.nonmodel[2])}"),
        ("  round 3 p50 / p95 (with turn end)", lambda v: f"{p50(v.nonmodel[3])} / {p95(v.nonmodel[3])}"),
        ("turn's non-model / 3, p50 / p95 (as the peer)", lambda v: f"{p50(v.per_turn)} / {p95(v.per_turn)}"),
        ("  with start() too, p50 / p95", lambda v: f"{p50(v.with_start)} / {p95(v.with_start)}"),
        ("CPU of the turn's thread, round 1 / 2 / 3 p50", lambda v: " / ".join(p50(v.cpu[r]) for r in ROUNDS)),
        ("our statements, round 1 / 2 / 3 (median)", lambda v: by_round(v.ours)),
        ("  max in a round with two tool calls (2)", lambda v: f"{max(v.ours[2])}"),
        ("the tools' own, round 1 / 2 / 3 (median)", lambda v: by_round(v.tools)),
        ("  of which SQL (client-timed) p50 (ms)", lambda v: p50(v.sql)),
        ("  of which event sends p50 (ms)", lambda v: p50(v.events)),
        ("  of which COMMITs p50 (ms) / count", lambda v: f"{p50(v.commits)} / {harness.median(v.commit_count):.0f}"),
        ("  of which SDK build+parse p50 (ms)", lambda v: p50(v.sdk)),
        ("  of which other Python p50 (ms)", lambda v: p50(v.other)),
        ("history.load p50 / p95 (ms)", lambda v: f"{p50(v.history)} / {p95(v.history)}"),
        ("request build p50 / p95 (ms)", lambda v: f"{p50(v.build)} / {p95(v.build)}"),
        (
            "request JSON median / max (KiB)",
            lambda v: f"{harness.median(v.build_bytes) / 1024:.1f} / {max(v.build_bytes) / 1024:.1f}",
        ),
        (
            "request messages median / max",
            lambda v: f"{harness.median(v.build_messages):.0f} / {max(v.build_messages)}",
        ),
        ("HTTP to model per call p50 (ms)", lambda v: p50(v.http)),
        ("whole run_turn p50 / p95 (ms)", lambda v: f"{p50(v.turn)} / {p95(v.turn)}"),
        ("turns per second (run_turn only)", lambda v: f"{len(v.turn) / sum(v.turn):.1f}"),
        ("start() p50 (ms) / statements", lambda v: f"{p50(v.start)} / {harness.median(v.start_queries):.0f}"),
    ]
    width = 48
    print(
        "\nper round = from the end of the previous round (the task's start for round 1) to the end of this one "
        "(the task's end for round 3), minus the SDK's HTTP send to the model"
    )
    print(f"\n{'':<{width}}{a.name:>22}{b.name:>24}")
    print("-" * (width + 46))
    for label, value in rows:
        print(f"{label:<{width}}{value(a):>22}{value(b):>24}")

    print(f"\nstatements of one turn, round by round ({a.name}; 'tool:' = the tool's own):")
    for r in ROUNDS:
        print(f"  round {r}: " + "; ".join(a.sample[r]))
    print(f"\nour statements per turn by kind ({a.name} / {b.name}: median count over turns, client-timed p50 ms):")
    names = sorted({k for c in a.kinds + b.kinds for k in c}, key=lambda k: -harness.median([c[k] for c in a.kinds]))

    def each(v: Variant, name: str) -> str:
        return p50(v.kind_seconds[name]) if v.kind_seconds.get(name) else "-"

    for name in names + sorted({k for v in (a, b) for k in v.kind_seconds if k.startswith("tool: ")}):
        counts = [harness.median([c[name] for c in v.kinds]) if name in names else 0 for v in (a, b)]
        print(f"  {name:<52}{counts[0]:>5.0f} {each(a, name):>7}{counts[1]:>6.0f} {each(b, name):>7}")

    print("\ntargets:")
    for v in (a, b):
        checks = [
            ("≤ 6 statements (round 2, two tool calls)", max(v.ours[2]) <= 6),
            ("(round 1, with setup)", max(v.ours[1]) <= 12),
            ("p50 ≤ 6 ms", harness.median(v.rounds()) <= 0.006),
            ("p95 ≤ 40 ms", harness.pct(v.rounds(), 95) <= 0.040),
        ]
        print(f"  {v.name:<24}" + "   ".join(f"{label}: {harness.verdict(ok)}" for label, ok in checks))
    diff = harness.median(b.rounds()) - harness.median(a.rounds())
    ratio = harness.median(b.rounds()) / harness.median(a.rounds())
    flat = diff <= max(0.001, 0.2 * harness.median(a.rounds()))
    print(
        f"  flat with the chat's length (p50 within 20% or 1 ms): {harness.verdict(flat)} "
        f"({LONG} earlier messages: {ratio:.2f}×, {diff * 1000:+.2f} ms)"
    )


def profile(
    ref: Any,
    chats: list[Any],
    note_ids: list[int],
    server: Any,
    clock: harness.QueryClock,
    holder: list[Probe],
    tools: str,
) -> None:
    """cProfile of ``run_turn`` alone over more turns (a profiler inflates timings; compare shares)."""
    from agent import tasks

    profiler = cProfile.Profile()
    original = tasks.run_turn.run

    def profiled(turn_ref: str) -> None:
        profiler.enable()
        try:
            original(turn_ref)
        finally:
            profiler.disable()

    tasks.run_turn.run = profiled
    try:
        with clock.installed():
            for chat in chats:
                run_one(ref, chat, note_ids, server, clock, holder, None, tools)
    finally:
        tasks.run_turn.run = original
    print(f"\nprofile of run_turn over {len(chats)} more turns (half short, half long), agent/ by cumulative time:")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(r"/agent/", 30)
    print("every function by own time:")
    stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per variant")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--server", help="an OpenAI-compatible scripted server's base URL (default: the tests' own)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--tools",
        choices=("plain", "api"),
        default="plain",
        help="plain: two one-query reads, as the peer bench's tools (default); api: the demo's DRF-built tools",
    )
    parser.add_argument(
        "--profile", action="store_true", help="afterwards, profile 20 more turns and print the costliest functions"
    )
    args = parser.parse_args()
    os.environ.setdefault("AGENT_LOG_LEVEL", "WARNING")  # one INFO line per ended turn would flood the output
    harness.setup()
    from django.conf import settings
    from django.db import connection
    from django.test import override_settings

    # The site's sessions may only read: the bench user is offered the reads alone.
    override_settings(AGENT={**settings.AGENT, "SESSION_WRITE_MODULES": []}).enable()
    if args.tools == "plain":
        declare_plain_tools()
    elif args.server:
        # An external scripted server calls the first tools offered with made-up values: offered
        # notes_search alone, it searches twice per round, each call a real query as the peer's tools
        # make (notes_read would be asked for a pk such as "v3" and refuse it without a query).
        from agent.tools import registry

        registry.unregister("notes_read")

    from tests.support.model_server import ScriptedModelServer

    server = None if args.server else ScriptedModelServer()
    if server is not None:
        server.start()
    try:
        point_endpoint_at(args.server or server.base_url)
        extra = 10 if args.profile else 0
        user, note_ids, short, long = prepare(args.turns, args.warmup + extra)
        ref = harness.login(user)
        purge_queue()
        clock = harness.QueryClock()
        holder = [Probe()]
        install(lambda: holder[0], clock)
        print(
            f"{connection.vendor} {getattr(connection, 'pg_version', '?')}, channel layer {os.environ['REDIS_URL']}, "
            f"model {'at ' + args.server if args.server else 'scripted in this process'}, tools: {args.tools}; "
            f"{args.turns} timed turns "
            f"per variant after {args.warmup} warm-up, interleaved; one worker, in-process"
        )
        began = time.monotonic()
        busy = harness.BusyCores()
        with clock.installed():
            for i in range(args.warmup + args.turns):
                timed = i >= args.warmup
                run_one(ref, short.chats[i], note_ids, server, clock, holder, short if timed else None, args.tools)
                run_one(ref, long.chats[i], note_ids, server, clock, holder, long if timed else None, args.tools)
        cores = busy.since()
        print(
            f"ran {2 * (args.warmup + args.turns)} turns in {time.monotonic() - began:.1f} s; the machine's busy "
            f"cores meanwhile: {cores:.2f} of {os.cpu_count()}"
        )
        for variant in (short, long):
            print(f"tool calls, {variant.name}: {tally(variant.calls)}")
        report(short, long)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"short": short.summary(), "long": long.summary(), "busy_cores": cores}, out)
        if args.profile:
            more = [c for pair in zip(short.chats[-extra:], long.chats[-extra:], strict=True) for c in pair]
            profile(ref, more, note_ids, server, clock, holder, args.tools)
    finally:
        if server is not None:
            server.stop()
        purge_queue()


if __name__ == "__main__":
    main()
