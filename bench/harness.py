"""What every benchmark shares: its own database, bulk rows by SQL, timers and percentiles.

The scripts run against a dedicated PostgreSQL database and Redis db so they
never collide with test runs; each default can be overridden from the shell.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

ROOT = Path(__file__).resolve().parent.parent

DEFAULTS = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/agent_bench",
    "REDIS_URL": "redis://127.0.0.1:6379/15",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
    "DEBUG": "false",
    "SECRET_KEY": "bench",
    "DJANGO_SETTINGS_MODULE": "agent_project.settings",
}


def setup() -> None:
    """Point Django at the bench database, set it up and migrate it."""
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def bench_user(username: str, *permissions: str) -> Any:
    """The bench's user (created once), holding ``agent.use_agent`` and ``permissions``."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user, _created = get_user_model().objects.get_or_create(username=username, defaults={"email": f"{username}@bench"})
    for name in ("agent.use_agent", *permissions):
        app_label, codename = name.split(".")
        permission = Permission.objects.get(content_type__app_label=app_label, codename=codename)
        user.user_permissions.add(permission)  # type: ignore[attr-defined]
    return get_user_model().objects.get(pk=user.pk)


def login(user: Any) -> Any:
    """A real session through the session engine, as a browser would hold it."""
    from django.test import Client

    from agent.access import SessionRef

    client = Client()
    client.force_login(user)
    return SessionRef(session_key=client.session.session_key, user_id=user.pk)


def fill_messages(
    conversation_id: Any,
    count: int,
    *,
    start_seq: int = 1,
    chars: int = 200,
    chunk: int = 100_000,
    progress: bool = False,
) -> None:
    """Append ``count`` user/assistant messages to a chat by ``INSERT ... SELECT generate_series``.

    Keeps ``(conversation, seq)`` dense and unique from ``start_seq`` on, and
    sets the chat's ``message_count`` and ``last_message_at`` to match.
    """
    from django.db import connection

    from agent.models import Conversation, Message

    filler = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * (chars // 50 + 1))[:chars]
    last = start_seq + count - 1
    overrides = {
        "id": ("gen_random_uuid()", []),
        "conversation": ("%s", [conversation_id]),
        "seq": ("g", []),
        "role": ("CASE WHEN mod(g, 2) = 1 THEN 'user' ELSE 'assistant' END", []),
        "content": ("'message ' || g || ' ' || %s", [filler]),
        "created_at": ("now() - make_interval(secs => (%s - g)::double precision)", [last]),
    }
    began = time.monotonic()
    for low in range(start_seq, last + 1, chunk):
        high = min(low + chunk - 1, last)
        insert_series(Message, overrides, low, high)
        if progress:
            print(f"  ... {high - start_seq + 1:,} / {count:,} messages ({time.monotonic() - began:.0f} s)", flush=True)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Conversation._meta.db_table} SET message_count = %s, "
            f"last_message_at = (SELECT max(created_at) FROM {Message._meta.db_table} WHERE conversation_id = %s) "
            f"WHERE id = %s",
            [last, conversation_id, conversation_id],
        )


def insert_series(model: Any, overrides: dict[str, tuple[str, list[Any]]], low: int, high: int) -> None:
    """One ``INSERT ... SELECT`` of a row per ``g`` in ``low..high``, in one transaction.

    ``overrides`` maps field names to an SQL expression over ``g`` and its
    parameters; every other column gets NULL or its model default, so a field
    added later does not break the fill.
    """
    from django.db import connection, transaction

    columns: list[str] = []
    exprs: list[str] = []
    params: list[Any] = []
    for field in model._meta.concrete_fields:
        columns.append(connection.ops.quote_name(field.column))
        if field.name in overrides:
            expr, field_params = overrides[field.name]
        elif field.null:
            expr, field_params = "NULL", []
        else:
            expr, field_params = "%s", [field.get_db_prep_save(field.get_default(), connection)]
        exprs.append(expr)
        params.extend(field_params)
    sql = (
        f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) "
        f"SELECT {', '.join(exprs)} FROM generate_series(%s::bigint, %s::bigint) AS g"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [*params, low, high])


class QueryClock:
    """Times and counts every query of this thread's connection (``connection.execute_wrapper``).

    Each query is recorded with the clock's ``tag`` at the time, so a caller
    can attribute queries to the phase it is in.
    """

    def __init__(self) -> None:
        self.queries: list[tuple[str, Any, float, Any]] = []  # (sql, params, seconds, tag)
        self.tag: Any = None

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.queries.append((sql, params, time.perf_counter() - began, self.tag))

    @contextmanager
    def installed(self) -> Iterator["QueryClock"]:
        from django.db import connection

        with connection.execute_wrapper(self):
            yield self

    def mark(self) -> int:
        return len(self.queries)


class BusyCores:
    """How many of the machine's cores were busy (not idle) since this was made, from ``/proc/stat``:
    the benchmarks share the machine, so each run says how loaded it was."""

    def __init__(self) -> None:
        self.began = time.monotonic(), self._busy()

    @staticmethod
    def _busy() -> float:
        with open("/proc/stat") as stat:
            ticks = [int(x) for x in stat.readline().split()[1:]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")

    def since(self) -> float:
        began, busy = self.began
        return (self._busy() - busy) / max(time.monotonic() - began, 1e-9)


def pct(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank), in the values' unit."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def verdict(ok: bool) -> str:
    return "yes" if ok else "NO"
