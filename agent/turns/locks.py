"""Leases for turns: a row per lock, taken in one atomic statement.

A lock is held until its lease runs out unless the heartbeat renews it; a
newer turn can take over only an expired lease, and never one whose holder is
a turn still waiting in the queue before its deadline (nothing renews a queued
turn's leases: a worker that claims it extends them, or the sweep ends it).
Every lease is judged by the database's clock, never a host's, so hosts whose
clocks disagree agree on who holds what. No PostgreSQL advisory locks: a
frozen worker would keep one forever.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any, Iterable

from django.db import connection
from django.db.models import Count, DateTimeField, ExpressionWrapper, QuerySet, Subquery
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now
from django.utils import timezone

from ..core import pooled
from ..core.conf import agent_settings
from ..core.ids import ConversationId, TurnId
from ..models import Lock, Turn

logger = logging.getLogger(__name__)


def _take_sql() -> str:
    """Insert, or take over a lease that ran out unless its holder is a queued turn before its deadline."""
    lock, turn, now = Lock._meta.db_table, Turn._meta.db_table, _sql_now()
    return f"""
INSERT INTO {lock} (name, holder, fence, expires_at)
VALUES (%s, %s, 1, {_sql_lease_end()})
ON CONFLICT (name) DO UPDATE
    SET holder = EXCLUDED.holder, fence = {lock}.fence + 1, expires_at = EXCLUDED.expires_at
    WHERE {lock}.expires_at < {now} AND NOT EXISTS (
        SELECT 1 FROM {turn} WHERE {turn}.id = {lock}.holder AND {turn}.status = %s AND {turn}.deadline_at > {now}
    )
RETURNING holder
"""


def _sql_now() -> str:
    """The database's time of the statement (Django's ``Now()`` in SQL of our own)."""
    if connection.vendor == "postgresql":
        return "STATEMENT_TIMESTAMP()"
    return "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')"


def _sql_lease_end() -> str:
    """When a lease taken by this statement runs out, by the database's clock."""
    seconds = int(agent_settings.LOCK_LEASE_S)
    if connection.vendor == "postgresql":
        return f"STATEMENT_TIMESTAMP() + INTERVAL '{seconds} seconds'"
    return f"STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW', '+{seconds} seconds')"


CHAT_PREFIX = "chat:"
USER_PREFIX = "user:"


def chat_lock(conversation_id: ConversationId) -> str:
    return f"{CHAT_PREFIX}{conversation_id}"


def user_slots(user_id: Any) -> list[str]:
    return [f"{USER_PREFIX}{user_id}:{slot}" for slot in range(agent_settings.MAX_TURNS_PER_USER)]


def live_leases() -> QuerySet[Lock]:
    """Every lease not yet run out, by the database's clock."""
    return Lock.objects.filter(expires_at__gt=Now())


def live_chat_leases() -> QuerySet[Lock]:
    """The chats' leases not yet run out: a running turn without one lost its worker."""
    return live_leases().filter(name__startswith=CHAT_PREFIX)


TELEGRAM_READER = "telegram:reader"
"""The one process that polls Telegram for the site's bot (two readers of one token are refused by Telegram)."""


def telegram_delivery_lock(turn_id: TurnId) -> str:
    """Held by the one task that sends a turn's messages to Telegram, so they arrive once and in order."""
    return f"telegram:turn:{turn_id}"


def hold(name: str, holder: Any) -> bool:
    """Keep ``name`` for a long-running ``holder`` (not a turn): renew its lease while it is held, else
    take it when it is free or ran out. False while another holder has it."""
    if Lock.objects.filter(name=name, holder=holder, expires_at__gt=Now()).update(expires_at=lease_end()):
        return True
    return take(name, holder)


def running_without_lease(conversation_id: ConversationId) -> list[Any]:
    """The chat's running turns whose lease ran out (their worker died), by the database's clock.

    In SQL of our own: every start asks it, and Django compiling the same query cost more than running it."""
    lock, turn, chat = Lock._meta.db_table, Turn._meta.db_table, Turn._meta.get_field("conversation").column
    sql = f"""
SELECT {turn}.id FROM {turn}
WHERE {turn}.{chat} = %s AND {turn}.status = %s AND NOT EXISTS (
    SELECT 1 FROM {lock} WHERE {lock}.name = %s AND {lock}.holder = {turn}.id AND {lock}.expires_at > {_sql_now()}
)
"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [_uuid_param(conversation_id), Turn.Status.RUNNING, chat_lock(conversation_id)])
        return [row[0] for row in cursor.fetchall()]


def take(name: str, holder: Any) -> bool:
    """Take ``name`` for ``holder``: insert, or take over an expired lease of a turn no longer queued."""
    with connection.cursor() as cursor:
        cursor.execute(_take_sql(), [name, _uuid_param(holder), Turn.Status.QUEUED])
        row = cursor.fetchone()
    return row is not None and str(row[0]).replace("-", "") == str(holder).replace("-", "")


def take_user_slot(user_id: Any, holder: Any) -> str | None:
    """The first free per-user slot, taken for ``holder``; None when all are busy.

    A slot whose lease ran out while its turn waits in the queue is not free: the turn still
    needs it when a worker claims it."""
    for name in user_slots(user_id):
        if take(name, holder):
            return name
    return None


def turn_locks(turn: Turn) -> list[str]:
    return [name for name in (chat_lock(turn.conversation_id), turn.user_slot) if name]


def held(turn: Turn) -> bool:
    """Whether the turn still holds all its locks, unexpired. One query."""
    names = turn_locks(turn)
    count = Lock.objects.filter(name__in=names, holder=turn.pk, expires_at__gt=Now()).count()
    return count == len(names)


def leases_held(holder: Any) -> Subquery:
    """How many leases ``holder`` (a turn's ref, or an expression for it) holds unexpired now, by
    the database's clock: an expression for a caller's one statement. A turn holds only the locks
    it took at its start, so this counts its ``turn_locks``."""
    live = Lock.objects.filter(holder=holder, expires_at__gt=Now()).order_by()
    return Subquery(live.values("holder").annotate(n=Count("name")).values("n")[:1])


def renew(turn: Turn) -> bool:
    """Extend the turn's leases; False when one was lost."""
    names = turn_locks(turn)
    renewed = Lock.objects.filter(name__in=names, holder=turn.pk, expires_at__gt=Now()).update(expires_at=lease_end())
    return renewed == len(names)


def reclaim(turn: Turn) -> bool:
    """Extend the leases of a turn that waited in the broker, even run out, unless taken over.

    Nothing renews a queued turn's lease; a row still naming it as holder was
    taken by no one, so extending it is safe. False when one was taken.
    """
    return reclaim_holder(turn.pk) == len(turn_locks(turn))


def reclaim_holder(holder: Any) -> int:
    """``reclaim`` by holder (a turn holds only the locks it took at its start): how many were extended."""
    return Lock.objects.filter(holder=holder).update(expires_at=lease_end())


def lease_end() -> ExpressionWrapper[CombinedExpression]:
    """When a lease taken or extended by this statement runs out, by the database's clock."""
    return ExpressionWrapper(Now() + timedelta(seconds=agent_settings.LOCK_LEASE_S), output_field=DateTimeField())


def lease_end_sql() -> str:
    """``lease_end`` for a statement written in SQL."""
    return _sql_lease_end()


def release(turn: Turn) -> None:
    """Delete only the rows this turn still holds."""
    release_names(turn_locks(turn), turn.pk)


def release_names(names: Iterable[str], holder: Any) -> None:
    """One DELETE (the ORM's delete would read the rows first, for signal receivers)."""
    names = list(names)
    if not names:
        return
    table = connection.ops.quote_name(Lock._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE name IN ({', '.join(['%s'] * len(names))}) AND holder = %s",
            [*names, _uuid_param(holder)],
        )


def fence(turn: Turn) -> bool:
    """Inside a transaction: lock the turn's chat lease row and check it is still ours.

    A takeover has to wait for this transaction, so a write fenced here can
    never land after another turn took the chat.
    """
    return (
        Lock.objects.select_for_update()
        .filter(name=chat_lock(turn.conversation_id), holder=turn.pk, expires_at__gt=Now())
        .exists()
    )


def _uuid_param(value: Any) -> Any:
    field = Lock._meta.get_field("holder")
    return field.get_db_prep_value(value, connection)


class Heartbeat:
    """Renews a running turn's leases every ``LOCK_RENEW_S``, during a long model call too.

    It stops renewing once the turn's deadline and ``STOP_GRACE_S`` have passed: a turn stuck in a
    step that never returns (which a worker of threads cannot kill, as prefork's hard time limit
    would) then loses its leases, every write of it is fenced off, and the sweep ends it and frees
    its chat. Between renewals it holds no database connection of a pool.
    """

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"agent-heartbeat-{turn.pk}", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        give_up = self.turn.deadline_at + timedelta(seconds=agent_settings.STOP_GRACE_S)
        try:
            while not self._stopped.wait(agent_settings.LOCK_RENEW_S):
                if timezone.now() >= give_up:
                    logger.warning("agent turn %s: still running past its deadline; its leases run out", self.turn.pk)
                    return
                if not renew(self.turn):
                    return  # lost: the runner sees it at its next check
                pooled.give_back()
        except Exception:
            logger.exception("agent turn %s: heartbeat failed", self.turn.pk)
        finally:
            connection.close()
