"""Page cost at depth: ``list_messages`` in a 1,000,000-message chat, the same in a
chat of as many messages with 1,000 versions off its active line, and ``list_conversations``
over 10,000 chats, first, middle and last page.

Run: ``.venv/bin/python bench/pages.py`` (``--runs N`` timed calls per page; ``--messages N``
for smaller chats). The first run fills the data by SQL (a minute or two); later runs reuse it.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import harness

MESSAGES = 1_000_000
CHATS = 10_000
USERNAME = "bench_pages"
BIG_TITLE = "bench: 1,000,000 messages"
VERSIONS = 1_000
VERSIONS_TITLE = "bench: 1,000 versions"


def prepare() -> tuple[Any, Any]:
    """The bench user and their big chat, filled once and reused while the counts hold."""
    from django.db import connection

    from agent.models import Conversation, Message

    user = harness.bench_user(USERNAME)
    big = Conversation.objects.filter(user=user, title=BIG_TITLE).first()
    chats = Conversation.objects.filter(user=user, status=Conversation.Status.ACTIVE).count()
    if big is not None and chats == CHATS and big.message_count == MESSAGES:
        stats = Message.objects.filter(conversation=big).values_list("seq", flat=True)
        if stats.count() == MESSAGES and stats.order_by("-seq").first() == MESSAGES:
            print(f"reusing the data: 1 chat with {MESSAGES:,} messages, {CHATS:,} chats")
            return user, big
    print("filling the data (first run) ...", flush=True)
    began = time.monotonic()
    with connection.cursor() as cursor:
        chat_ids = f"SELECT id FROM {Conversation._meta.db_table} WHERE user_id = %s"
        cursor.execute(f"DELETE FROM {Message._meta.db_table} WHERE conversation_id IN ({chat_ids})", [user.pk])
        cursor.execute(f"DELETE FROM {Conversation._meta.db_table} WHERE user_id = %s", [user.pk])
    big = Conversation.objects.create(user=user, title=BIG_TITLE)
    harness.fill_messages(big.pk, MESSAGES, progress=True)
    # The other chats: pairs share a last_message_at, so the cursor's uuid tie-break is exercised.
    harness.insert_series(
        Conversation,
        {
            "id": ("gen_random_uuid()", []),
            "user": ("%s", [user.pk]),
            "title": ("'chat ' || g", []),
            "status": ("%s", [Conversation.Status.ACTIVE.value]),
            "message_count": ("0", []),
            "last_message_at": ("now() - make_interval(mins => (g / 2)::int + 1)", []),
            "created_at": ("now() - make_interval(days => 30)", []),
            "updated_at": ("now()", []),
        },
        1,
        CHATS - 1,
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Message._meta.db_table}")
        cursor.execute(f"ANALYZE {Conversation._meta.db_table}")
    big.refresh_from_db()
    print(f"filled in {time.monotonic() - began:.0f} s")
    return user, big


def prepare_versions(user: Any) -> Any:
    """A chat of ``MESSAGES`` messages of which ``VERSIONS``, spread evenly, are earlier versions
    off the active line (each a sibling of the message after it), filled once and reused."""
    from django.db import connection

    from agent.models import Conversation, Message

    chat = Conversation.objects.filter(user=user, title=VERSIONS_TITLE).first()
    if chat is not None and chat.message_count == MESSAGES and chat.has_versions:
        print(f"reusing the data: 1 chat with {MESSAGES:,} messages, {VERSIONS:,} of them versions off its line")
        return chat
    print("filling the chat with versions ...", flush=True)
    if chat is not None:
        Message.objects.filter(conversation=chat).delete()
        chat.delete()
    # archived, so the chat list keeps its own count; an archived chat is paged alike
    chat = Conversation.objects.create(user=user, title=VERSIONS_TITLE, status=Conversation.Status.ARCHIVED)
    step = MESSAGES // VERSIONS
    half = step // 2

    def message_id(offset: str) -> str:
        return f"md5(%s || ':' || (g{offset}))::uuid"

    key = str(chat.pk)
    for low in range(1, MESSAGES + 1, 100_000):
        harness.insert_series(
            Message,
            {
                "id": (message_id(""), [key]),
                "conversation": ("%s", [chat.pk]),
                "seq": ("g", []),
                "role": ("CASE WHEN mod(g, 2) = 1 THEN 'user' ELSE 'assistant' END", []),
                "content": ("'message ' || g", []),
                # a version at every step's middle; the message after it is its sibling
                "parent": (
                    f"CASE WHEN g = 1 THEN NULL WHEN mod(g - 1, %s) = %s THEN {message_id(' - 2')}"
                    f" ELSE {message_id(' - 1')} END",
                    [step, half, key, key],
                ),
                "active": ("mod(g, %s) <> %s", [step, half]),
                "created_at": ("now() - make_interval(secs => (%s - g)::double precision)", [MESSAGES]),
            },
            low,
            min(low + 99_999, MESSAGES),
        )
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Conversation._meta.db_table} SET message_count = %s, has_versions = true,"
            f" line_end = md5(%s || ':' || %s)::uuid WHERE id = %s",
            [MESSAGES, key, MESSAGES, chat.pk],
        )
        cursor.execute(f"ANALYZE {Message._meta.db_table}")
    chat.refresh_from_db()
    return chat


def message_at(chat: Any, seq: int) -> Any:
    from agent.models import Message

    return Message.objects.filter(conversation=chat, seq=seq).values_list("id", flat=True).get()


def chat_cursors(ref: Any) -> list[str | None]:
    """Walk every page of the chat list once; the cursor that opens each page."""
    from agent.conversations import list_conversations

    cursors: list[str | None] = [None]
    seen = 0
    while True:
        page = list_conversations(ref, impersonated=False, cursor=cursors[-1])
        seen += len(page.conversations)
        if page.next_cursor is None:
            break
        cursors.append(page.next_cursor)
    assert seen == CHATS, f"the chat list walked {seen} chats, expected {CHATS}"
    return cursors


def is_main(table: str) -> Callable[[str], bool]:
    """The page's own query: the ordered, limited SELECT on the page's table."""
    return lambda sql: f'FROM "{table}"' in sql and "ORDER BY" in sql and "LIMIT" in sql and sql.startswith("SELECT")


@dataclass
class PageStats:
    """One page's calls: whole-call, main-query and all-SQL seconds."""

    call: list[float] = field(default_factory=list)
    main: list[float] = field(default_factory=list)
    sql: list[float] = field(default_factory=list)
    queries: int = 0
    rows: int = 0
    main_sql: tuple[str, Any] = ("", None)


Case = tuple[str, Callable[[], int], Callable[[str], bool]]


def measure(cases: list[Case], runs: int, warmup: int) -> dict[str, PageStats]:
    """Interleave the cases so drift hits them alike; whole call, main query and all SQL per call."""
    clock = harness.QueryClock()
    results = {name: PageStats() for name, _, _ in cases}
    with clock.installed():
        for run in range(warmup + runs):
            for name, call, main in cases:
                mark = clock.mark()
                began = time.perf_counter()
                rows = call()
                elapsed = time.perf_counter() - began
                queries = clock.queries[mark:]
                mains = [q for q in queries if main(q[0])]
                assert mains, f"{name}: no main query seen"
                if run < warmup:
                    continue
                r = results[name]
                r.call.append(elapsed)
                r.main.append(mains[-1][2])
                r.sql.append(sum(q[2] for q in queries))
                r.queries = len(queries)
                r.rows = rows
                r.main_sql = (mains[-1][0], mains[-1][1])
    return results


def server_time(sql: str, params: Any, repeat: int = 20) -> tuple[float, str]:
    """Median server-side execution time of the main query (EXPLAIN ANALYZE) and its plan's first lines."""
    from django.db import connection

    times = []
    plan: list[str] = []
    with connection.cursor() as cursor:
        for _ in range(repeat):
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            plan = [row[0] for row in cursor.fetchall()]
            line = next(p for p in plan if p.startswith("Execution Time"))
            times.append(float(line.split(":")[1].split()[0]) / 1000)
    nodes = [p.strip() for p in plan if "Scan" in p or p.lstrip().startswith(("Limit", "->  Limit", "Sort"))]
    return harness.median(times), " / ".join(n.split("  (")[0].replace("->  ", "") for n in nodes[:3])


def report(title: str, results: dict[str, PageStats]) -> bool:
    first = harness.median(next(iter(results.values())).call)
    print(f"\n{title}")
    head = (
        f"{'page':<28}{'rows':>5}{'SQLs':>5}{'call p50':>10}{'call p95':>10}{'main p50':>10}{'main p95':>10}"
        f"{'server':>8}{'all SQL':>9}{'ratio':>7}  {'≤2×':<4}{'<5ms':<5}{'SQL≤2':<6}{'p95≤20':<6}"
    )
    print(head)
    print("-" * len(head))
    all_ok = True
    plans = []
    for name, r in results.items():
        call50, call95 = harness.median(r.call), harness.pct(r.call, 95)
        main50, main95 = harness.median(r.main), harness.pct(r.main, 95)
        server, plan = server_time(*r.main_sql)
        plans.append((name, plan))
        ratio = call50 / first
        checks = [ratio <= 2, call50 < 0.005, main95 <= 0.002, call95 <= 0.020]
        all_ok = all_ok and all(checks)
        print(
            f"{name:<28}{r.rows:>5}{r.queries:>5}{harness.ms(call50):>10}{harness.ms(call95):>10}"
            f"{harness.ms(main50):>10}{harness.ms(main95):>10}{harness.ms(server):>8}"
            f"{harness.ms(harness.median(r.sql)):>9}{ratio:>7.2f}  "
            + "".join(f"{harness.verdict(c):<{w}}" for c, w in zip(checks, (4, 5, 6, 6), strict=True))
        )
    print("plans of the main query (EXPLAIN ANALYZE):")
    for name, plan in plans:
        print(f"  {name:<26}{plan}")
    return all_ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="timed calls per page")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--messages", type=int, default=None, help="messages per big chat (default 1,000,000)")
    args = parser.parse_args()
    global MESSAGES, BIG_TITLE
    if args.messages:
        MESSAGES, BIG_TITLE = args.messages, f"bench: {args.messages:,} messages"
    harness.setup()
    from django.db import connection

    from agent.conversations import list_conversations, list_messages

    user, big = prepare()
    versioned = prepare_versions(user)
    ref = harness.login(user)
    middle = message_at(big, MESSAGES // 2)
    versioned_middle = message_at(versioned, MESSAGES // 2)
    cursors = chat_cursors(ref)
    print(
        f"{connection.vendor} {getattr(connection, 'pg_version', '?')}; "
        f"{args.runs} timed calls per page after {args.warmup} warm-up; "
        "times in ms; 'main' = the page's own SELECT timed at the client (round trip included), "
        "'server' = its EXPLAIN ANALYZE execution time"
    )

    def messages(chat: Any = big, **kwargs: Any) -> Callable[[], int]:
        return lambda: len(list_messages(ref, chat.pk, impersonated=False, **kwargs))

    def chats(cursor: str | None) -> Callable[[], int]:
        return lambda: len(list_conversations(ref, impersonated=False, cursor=cursor).conversations)

    on_messages = is_main("agent_message")
    message_cases = [
        ("first (oldest 50)", messages(), on_messages),
        (f"middle before=#{MESSAGES // 2:,}", messages(before=middle), on_messages),
        (f"middle after=#{MESSAGES // 2:,}", messages(after=middle), on_messages),
        ("last (latest=True)", messages(latest=True), on_messages),
    ]
    version_cases = [
        ("first (oldest 50)", messages(versioned), on_messages),
        (f"middle before=#{MESSAGES // 2:,}", messages(versioned, before=versioned_middle), on_messages),
        (f"middle after=#{MESSAGES // 2:,}", messages(versioned, after=versioned_middle), on_messages),
        ("last (latest=True)", messages(versioned, latest=True), on_messages),
    ]
    on_chats = is_main("agent_conversation")
    mid = len(cursors) // 2
    chat_cases = [
        ("first", chats(None), on_chats),
        (f"middle (page {mid + 1} of {len(cursors)})", chats(cursors[mid]), on_chats),
        (f"last (page {len(cursors)})", chats(cursors[-1]), on_chats),
    ]
    began = time.monotonic()
    ok_messages = report(
        f"list_messages, one chat of {MESSAGES:,} messages, limit 50",
        measure(message_cases, args.runs, args.warmup),
    )
    ok_versions = report(
        f"list_messages, one chat of {MESSAGES:,} messages with {VERSIONS:,} versions off its line, limit 50",
        measure(version_cases, args.runs, args.warmup),
    )
    ok_chats = report(
        f"list_conversations, {CHATS:,} chats of one user, limit 20",
        measure(chat_cases, args.runs, args.warmup),
    )
    print(
        f"\ntargets (each page ≤ 2× the first, median < 5 ms, main SQL p95 ≤ 2 ms, call p95 ≤ 20 ms): "
        f"list_messages {'met' if ok_messages else 'NOT met'}, with versions {'met' if ok_versions else 'NOT met'},"
        f" list_conversations {'met' if ok_chats else 'NOT met'}"
        f"  (measured in {time.monotonic() - began:.0f} s)"
    )


if __name__ == "__main__":
    main()
