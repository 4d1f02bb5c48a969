"""A running turn's writes, each fenced by the chat's lease, and the checks they carry.

Apart from the rounds (``runner``): the rounds decide what to store and when to
check, this module how, so that no write of a turn skips its fence or the check it
carries. Every write goes through ``Fence.store``, fenced by the chat's lease in the
same transaction (on PostgreSQL the same statement), so a worker that froze past its
lease writes nothing. Each check is one statement compiled once per worker thread
(``statements.Columns``) that reads the session, the rights, the turn and its leases
afresh. On PostgreSQL the checks between a model call and the tool calls ride in the
statements that store: the answer is stored only where the check after the model call
passes, and each tool result's store reads the check before the next call, so a round
with two tool calls costs five statements.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, Subquery
from django.utils import timezone

from ..access import Accepted, Check, Scope, actor_of, prepare_check
from ..ai import Completion, ToolCall
from ..conversations import LeaseLost, append_message
from ..conversations.store import GateClosed, RidingCheck, append_checked
from ..core.conf import agent_settings
from ..core.errors import Forbidden, NotFound, Refusal
from ..core.statements import Columns, slot
from ..limits import admission, costs
from ..models import AgentSettings, AIRequest, Conversation, Message, Turn
from . import locks

logger = logging.getLogger(__name__)
Status = Turn.Status


@dataclass(frozen=True)
class End:
    """How a turn ended: its status, and why where the status does not say."""

    status: str
    reason: str = ""


class TurnEnded(Exception):
    """Ends the turn as ``end`` says, from wherever it is raised: a check, a store, a failed model call."""

    request_id: Any = None  # set by ``complete`` when it ended a model call: the call's journal row

    def __init__(self, end: End) -> None:
        super().__init__(end.status)
        self.end = end


class StoreFailed(Exception):
    """The database refused a message; the log gets field names and codes only."""


class Fence:
    """One running turn's checks, and its writes, each only while the turn holds the chat's lease."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.actor = actor_of(turn)  # the session or Telegram link it runs for, checked at every step
        self.accepted = Accepted()  # the session data and password hash this turn's checks passed
        # what the check that rode with the last store read, for the next step: judged, or still to judge
        self.checked: Scope | tuple[Check, Any] | None = None
        self.flagged = False
        # what the check before the last model call read: the cost caps, the site's instructions
        self.budget = costs.Verdict()
        self.site_prompt = ""

    # -- checks ------------------------------------------------------------------

    def verify(self, *, budget: bool = False) -> Scope:
        """Everything a step needs, in one statement: no stop asked, the deadline not passed, the
        leases held, the chat there, the session live with its rights; with ``budget`` (before a
        model call) also the cost caps and the site's instructions."""
        self.checked = None
        check = self._check(budget=budget)
        with connection.cursor() as cursor:
            cursor.execute(check.sql, check.params)
            return self._passed(check, cursor.fetchone(), budget=budget)

    def fresh_scope(self) -> Scope:
        """The scope of the check that rode with the last store (judged now if it is not yet);
        else a check now."""
        checked, self.checked = self.checked, None
        if checked is None:
            return self.verify()
        return checked if isinstance(checked, Scope) else self._passed(*checked)

    def _check(self, *, budget: bool) -> Check:
        values = {"turn": self.turn.pk, "chat": self.turn.conversation_id}
        if budget:
            values.update(costs.budget_values())
        try:
            return prepare_check(
                self.actor, impersonated=False, annotations=ROUND_CHECK if budget else STEP_CHECK, values=values
            )
        except Refusal:
            raise TurnEnded(End(Status.FAILED, "session_ended")) from None

    def _passed(self, check: Check, check_row: Any, *, budget: bool = False) -> Scope:
        """The scope ``check_row`` allows, or the end it calls for."""
        try:
            scope, row = check.judge(check_row, self.accepted)
        except Forbidden:
            raise TurnEnded(End(Status.FAILED, "forbidden")) from None
        except Refusal:
            raise TurnEnded(End(Status.FAILED, "session_ended")) from None
        self._judge(row)
        if row["agent_chat_owner"] != scope.user_id:
            raise TurnEnded(End(Status.FAILED, "chat_gone"))
        if budget:
            self.budget = costs.verdict(row)
            self.site_prompt = row["agent_site_prompt"] or ""
        return scope

    def _riding(self, how: str | None) -> tuple[Check, RidingCheck] | None:
        """The step check to read in the statement of a store: ``"guard"`` stores only where it
        passes (the store it guards), ``"along"`` stores regardless (the check before the next
        step). None where it cannot ride (not PostgreSQL, or a gate needs Python this time)."""
        if how is None or connection.vendor != "postgresql":
            return None
        if how == "along" and connection.in_atomic_block:
            return None  # a transaction may read its older snapshot: the next step checks afresh
        check = self._check(budget=False)
        if how == "along":
            return check, RidingCheck(check.sql, check.params)
        gate = check.gate(self.accepted)
        if gate is None:
            return None
        sql, params = gate
        turn_sql = (
            "agent_check.agent_turn_status = %s AND NOT agent_check.agent_stop_asked"
            " AND agent_check.agent_leases >= %s AND agent_check.agent_chat_owner = agent_check.agent_gate_user"
        )
        turn_params = [Status.RUNNING, len(locks.turn_locks(self.turn))]
        return check, RidingCheck(check.sql, check.params, (f"{sql} AND {turn_sql}", [*params, *turn_params]))

    def verify_claimed(self, *, leases_held: bool) -> None:
        """The turn's own state as ``claim`` read it: before the user's message is stored, which a
        session that ended since ``start`` must not lose."""
        self._judge(
            {
                "agent_turn_status": Status.RUNNING,
                "agent_stop_asked": self.turn.stop_requested_at is not None,
                "agent_leases": len(locks.turn_locks(self.turn)) if leases_held else 0,
            }
        )

    def _judge(self, row: dict[str, Any]) -> None:
        if row["agent_stop_asked"]:
            raise TurnEnded(End(Status.STOPPED))
        if timezone.now() >= self.turn.deadline_at:
            raise TurnEnded(End(Status.DEADLINE))
        if row["agent_turn_status"] != Status.RUNNING or (row["agent_leases"] or 0) < len(locks.turn_locks(self.turn)):
            raise TurnEnded(End(Status.FAILED, "lock_lost"))  # the sweep or a newer turn has the chat

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """A transaction that writes only while the turn still holds the chat's lease."""
        with transaction.atomic():
            if not locks.fence(self.turn):
                raise TurnEnded(End(Status.FAILED, "lock_lost"))
            yield

    # -- storing -------------------------------------------------------------------

    def store_answer(
        self, answer_id: uuid.UUID, content: str, calls: list[ToolCall], completion: Completion, off_purpose: str | None
    ) -> Message:
        """The model's answer with its tool calls and usage, stored only where the check after the
        model call passes (it rides in the store as its guard)."""
        tool_calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        return self.store(
            id=answer_id,
            role=Message.Role.ASSISTANT,
            content=content,
            tool_calls=tool_calls or None,
            model=completion.model,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            cost_usd=completion.cost_usd,
            latency_ms=completion.latency_ms,
            ai_request_id=completion.request_id,
            off_purpose=off_purpose,
            check="guard",
        )

    def keep_partial(self, end: End, answer_id: uuid.UUID, shown: str, request_id: Any) -> None:
        """On a stop or the deadline, the answer as far as it had streamed (``shown``: the draft,
        a marker it may be beginning held back) is stored, the call's journal row linked to it.

        Nothing on a revocation (the user may no longer see it), nothing when no text had come,
        and never a tool call: those that came were not all received, or are not to run.
        """
        if end.status not in (Status.STOPPED, Status.DEADLINE) or not shown.strip():
            return
        usage_of_call = AIRequest.objects.filter(pk=request_id).values(*_PARTIAL_USAGE).first() if request_id else None
        self.store(
            id=answer_id,
            role=Message.Role.ASSISTANT,
            content=shown,
            partial=True,
            ai_request_id=request_id,
            **(usage_of_call or {}),
        )

    def store_result(
        self, call: ToolCall, outcome: str, result: Any, confirmation: Any, answer: Message, *, check: str | None
    ) -> str:
        """A tool call's result, cut to ``TOOL_RESULT_CHARS``, with the card it proposed: the text
        stored, which is what the model is sent."""
        text = json.dumps(result, ensure_ascii=False, default=str)
        limit = agent_settings.TOOL_RESULT_CHARS
        truncated = len(text) > limit
        if truncated:
            text = text[:limit]
        self.store(
            role=Message.Role.TOOL,
            tool_name=call.name[:64],
            tool_call_id=call.id[:128],
            tool_outcome=outcome,
            tool_result=text if truncated else json.loads(text),
            tool_result_truncated=truncated,
            confirmation=confirmation,
            assistant_message=answer,
            check=check,
        )
        return text

    def notice(
        self, code: str, params: dict[str, Any] | None = None, *, check: str | None = None, **fields: Any
    ) -> Message:
        fields.update(role=Message.Role.NOTICE, notice_code=code, notice_params=params or {})
        return self.store(check=check, **fields)

    def store(
        self,
        *,
        title_from: str | None = None,
        off_purpose: str | None = None,
        users_own: bool = False,
        check: str | None = None,
        **fields: Any,
    ) -> Message:
        """Append a message of this turn, with what goes with it (the turn's link to the user's
        message, the off-purpose flag), only while the turn still holds the chat's lease: checked
        and locked in the statement that stores it, and what goes with it in the same transaction.

        With ``check``, the step check rides in the same statement (``_riding``): ``"guard"`` stores
        the message only if the check passes, ``"along"`` stores it and then judges the check; the
        scope it read serves the next step (``fresh_scope``). A guard that does not pass in SQL is
        judged in Python: a refusal ends the turn with nothing stored, else the message is stored."""
        if check == "guard" and timezone.now() >= self.turn.deadline_at:
            self.verify()  # ends the turn as a check does: stopped when a stop was asked, else the deadline
        riding = self._riding(check)
        if riding is None and check == "guard":
            self.checked = self.verify()  # the check it cannot carry, before the store it guards
        lease = (locks.chat_lock(self.turn.conversation_id), self.turn.pk)
        flag_reason = None if self.flagged else off_purpose  # one flag per turn
        # Alone, the message's one statement is atomic. A transaction when the flag goes with it, or
        # a savepoint inside a caller's transaction, so a refused message leaves that one usable.
        own = flag_reason is not None or transaction.get_connection().in_atomic_block
        try:
            with transaction.atomic() if own else contextlib.nullcontext():
                conversation_id, turn = self.turn.conversation_id, self.turn
                if riding is None:
                    message = append_message(
                        conversation_id, turn=turn, title_from=title_from, lease=lease, link_turn=users_own, **fields
                    )
                else:  # an answer, a result or a notice: never the user's message, nor a title
                    message = self._store_checked(riding, lease, fields)
                if flag_reason is not None:
                    self.flagged = admission.report_off_purpose(self.turn.user, self.turn.pk, flag_reason)
                return message
        except LeaseLost:
            raise TurnEnded(End(Status.FAILED, "lock_lost")) from None
        except NotFound:
            raise TurnEnded(End(Status.FAILED, "chat_gone")) from None
        except (DatabaseError, ValidationError) as error:
            logger.error(
                "agent turn %s: a %s message was refused (%s)", self.turn.pk, fields.get("role"), type(error).__name__
            )
            raise StoreFailed() from None

    def _store_checked(
        self, riding: tuple[Check, RidingCheck], lease: tuple[str, Any], fields: dict[str, Any]
    ) -> Message:
        check, rider = riding
        try:
            message, row = append_checked(self.turn.conversation_id, rider, turn=self.turn, lease=lease, **fields)
        except GateClosed as closed:
            self.checked = self._passed(check, closed.row)  # ends the turn on a refusal; else a live
            conversation_id, turn = self.turn.conversation_id, self.turn  # session was saved since: store as it passed
            return append_message(conversation_id, turn=turn, lease=lease, **fields)
        self.checked = (check, row)  # judged at the next step, after the caller's transaction ends
        return message


_PARTIAL_USAGE = ("model", "input_tokens", "output_tokens", "cost_usd", "latency_ms")
"""What a partial answer takes from its call's journal row: the usage, or its estimate."""


def _turn_columns(*, budget: bool) -> dict[str, Any]:
    """What a turn's check reads besides the session: its status and stop mark, its leases, its
    chat; before a model call also the budget and the site's instructions. Per-turn values are
    slots, so one compiled statement serves every turn of a worker."""
    turn_pk = slot("turn", Turn._meta.pk)
    turn = Turn.objects.filter(pk=turn_pk).order_by()
    conversation = Conversation.objects.filter(pk=slot("chat", Conversation._meta.pk)).order_by()
    columns = {
        "agent_turn_status": Subquery(turn.values("status")[:1]),
        "agent_stop_asked": Exists(turn.filter(stop_requested_at__isnull=False)),
        "agent_leases": locks.leases_held(turn_pk),
        "agent_chat_owner": Subquery(conversation.exclude(status=Conversation.Status.DELETED).values("user_id")[:1]),
    }
    if budget:
        columns.update(costs.budget_columns())
        columns["agent_site_prompt"] = Subquery(AgentSettings.objects.order_by().values("system_prompt")[:1])
    return columns


STEP_CHECK = Columns("agent.turn.step", lambda: _turn_columns(budget=False))
ROUND_CHECK = Columns("agent.turn.round", lambda: _turn_columns(budget=True))
