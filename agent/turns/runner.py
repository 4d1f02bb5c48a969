"""The rounds of one turn (SPEC §3.1, §3.2), run in the turn's Celery task.

Every write goes through ``_store``, fenced by the chat's lease in the same
transaction, so a worker that froze past its lease writes nothing.
"""
from __future__ import annotations

import json
import logging
import threading
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Subquery
from django.utils import timezone, translation

from .. import confirmations, notices
from ..access import Scope, SessionRef, authorize_session
from ..ai import AIError, Completion, ToolCall, complete
from ..ai import guard, usage
from ..conf import agent_settings
from ..conversations import owned_conversation
from ..errors import Forbidden, NotFound, Refusal
from ..models import AgentSettings, Lock, Message, Turn
from ..tools import execute_as, registry, visible_for
from . import history, locks, monitor
from .prompt import system_prompt

logger = logging.getLogger(__name__)
Status = Turn.Status
MARKER_OPEN, MARKER_CLOSE = "⟦off_purpose:", "⟧"
STUB = "[left out: an earlier result of this turn, too long to send again]"


@dataclass(frozen=True)
class End:
    status: str
    reason: str = ""


class TurnEnded(Exception):
    def __init__(self, end: End) -> None:
        super().__init__(end.status)
        self.end = end


def run(turn_id: Any) -> None:
    """Claim the turn (a second delivery finds it claimed), run it, and end it however it ends."""
    turn = claim(turn_id)
    if turn is None:
        return
    heartbeat = Heartbeat(turn)
    heartbeat.start()
    end = End(Status.INTERRUPTED, "crashed")
    try:
        with translation.override(turn.language):
            end = TurnRunner(turn).run()
    except TurnEnded as ended:
        end = ended.end
    except SoftTimeLimitExceeded:
        end = End(Status.DEADLINE)
    except StoreFailed:
        end = End(Status.INTERRUPTED, "store_failed")
    except Exception:
        logger.exception("agent turn %s crashed", turn.pk)
    finally:
        heartbeat.stop()
        with translation.override(turn.language):
            monitor.end_turn(turn, end.status, reason=end.reason)


def claim(turn_id: Any) -> Turn | None:
    """``queued`` → ``running`` in one conditional UPDATE; None when someone has it."""
    try:
        pk = uuid.UUID(str(turn_id))
    except ValueError:
        return None
    with transaction.atomic():  # the sweep sees the turn queued, or running with its leases back
        claimed = Turn.objects.filter(pk=pk, status=Status.QUEUED).update(
            status=Status.RUNNING, started_at=timezone.now()
        )
        if not claimed:
            return None
        turn = Turn.objects.select_related("endpoint", "conversation", "user").get(pk=pk)
        locks.reclaim(turn)  # a lease that ran out while queued; a takeover shows at the first check
    from .. import events

    events.turn_changed(turn.conversation_id, turn.pk, Status.RUNNING)
    return turn


class StoreFailed(Exception):
    """The database refused a message; the log gets field names and codes only."""


class TurnRunner:
    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.ref = SessionRef(session_key=turn.session_key, user_id=turn.user_id)
        self.this_turn: list[dict[str, Any]] = []
        self.results: list[tuple[int, dict[str, Any]]] = []  # (round, tool message for the model)
        self.flagged = False

    # -- the turn ----------------------------------------------------------------

    def run(self) -> End:
        """The user's message first (SPEC §3.1), then the rounds, each after its re-check."""
        self.checkpoint(locks_too=True)
        confirmations.settle_lapsed(self.turn.conversation_id)  # before the chat is read (SPEC §4)
        limit = agent_settings.HISTORY_CHARS
        current = {"role": "user", "content": history.user_content(self.turn.text, [], limit)}
        self.history = history.load(self.turn.conversation_id, current, limit)
        user_message = self._store(role=Message.Role.USER, content=self.turn.text, title_from=self.turn.text)
        Turn.objects.filter(pk=self.turn.pk).update(user_message=user_message)
        rounds = agent_settings.MAX_TOOL_ROUNDS
        for number in range(1, rounds + 1):
            if number > 1:
                self.checkpoint(locks_too=True)
            scope = self.recheck()
            if number == 1:
                own = scope.user_settings
                site_prompt = AgentSettings.current().system_prompt
                self.system = system_prompt(scope.user, site_prompt, own.instructions if own else "")
            if not self.round(scope, number, last=number == rounds):
                return End(Status.FINISHED)
        self._notice("max_rounds")
        return End(Status.FINISHED, "max_rounds")

    def round(self, scope: Scope, number: int, *, last: bool) -> bool:
        """One model call and its tool calls; False when the turn is over."""
        shown = [] if last else visible_for(scope, allow="all")
        answer_id = uuid.uuid4()
        try:
            with usage.stored_by_caller(answer_id):
                completion = complete(
                    self.turn.endpoint, self.request_messages(number),
                    tools=[t.definition() for t in shown] or None, user=scope.user, source="agent",
                    task="agent.chat", admission=self.turn.admission or None,
                    attribution={"message": str(answer_id), "turn": str(self.turn.pk)},
                    capture=agent_settings.CAPTURE_CONTENT,
                )
        except AIError as error:
            self.checkpoint()
            journal_row = None if error.refused else error.request_id  # a refused call reached no sink
            self._notice(notices.MODEL_FAILED, error.params(), ai_request_id=journal_row)
            raise TurnEnded(End(Status.FAILED, "model_failed")) from None
        self.checkpoint()
        content = self.cut_marker(completion.content, scope)
        calls = [c for c in completion.tool_calls if c.name]
        if not content.strip() and not calls:
            self._notice("empty_answer", ai_request_id=completion.request_id)
            return False
        answer = self._store_answer(answer_id, content, calls, completion)
        if not calls:
            return False
        scope = self.recheck(chat=False)  # rights lost during the model call: no tool step with the old ones
        still_shown = {t.name for t in visible_for(scope, allow="all")}
        return not self.run_calls(scope, calls, [t for t in shown if t.name in still_shown], answer, number)

    def run_calls(self, scope: Scope, calls: list[ToolCall], shown: list[Any], answer: Message, number: int) -> bool:
        """Run the answer's tool calls in order; True when a write now waits (the turn ends)."""
        shown_names = {t.name for t in shown}
        ids = Counter(c.id for c in calls)
        waiting = False
        for index, call in enumerate(calls):
            self.checkpoint(locks_too=True)
            tool = registry.get(call.name)
            is_write = tool is not None and tool.kind == "write"
            if index >= agent_settings.MAX_TOOL_CALLS_PER_ROUND:
                outcome, result, card = "denied", _denied("Too many tool calls in one answer."), None
            elif call.name not in shown_names:
                outcome, result, card = "denied", _denied("This tool is not available."), None
            elif waiting:
                reason = "Confirm the earlier change first." if is_write else "Held for confirmation."
                outcome, result, card = "denied", _denied(reason), None
            elif is_write and ids[call.id] > 1:
                outcome, result, card = "denied", _denied("Another call of this answer has the same id."), None
            else:
                outcome, result, card = self.execute(scope, call)
                waiting = outcome == "needs_confirmation"
            self._store_result(call, outcome, result, card, answer, number)
        return waiting

    def execute(self, scope: Scope, call: ToolCall) -> tuple[str, Any, Any]:
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            return "invalid_arguments", {"error": "invalid_arguments", "details": ["arguments are not JSON"]}, None
        tool = registry.get(call.name)
        if tool is None or tool.kind != "write":
            result = execute_as(scope, call.name, args, allow="all", via="agent", chat=self.turn.conversation,
                                call_id=call.id, turn=self.turn)
            return result.outcome, result.result, None
        with transaction.atomic():  # a write's card is stored only while the turn holds the chat
            if not locks.fence(self.turn):
                raise TurnEnded(End(Status.FAILED, "lock_lost"))
            result = execute_as(scope, call.name, args, allow="all", via="agent", chat=self.turn.conversation,
                                call_id=call.id, turn=self.turn)
        return result.outcome, result.result, result.confirmation

    # -- the request -------------------------------------------------------------

    def request_messages(self, number: int) -> list[dict[str, Any]]:
        """System prompt, history, and this turn's messages with old results stubbed to fit."""
        budget = 10 * agent_settings.TOOL_RESULT_CHARS
        whole: set[int] = set()
        for position in range(len(self.results) - 1, -1, -1):
            result_round, message = self.results[position]
            size = len(message["content"])
            if result_round == number - 1 or size <= budget:
                whole.add(id(message))
                budget -= size
            else:
                budget = -1
        turn_messages = [
            m if m.get("role") != "tool" or id(m) in whole else {**m, "content": STUB} for m in self.this_turn
        ]
        return [{"role": "system", "content": self.system}, *self.history, *turn_messages]

    def cut_marker(self, content: str, scope: Scope) -> str:
        """Cut an off-purpose marker at the very end and report it, once per turn."""
        stripped = content.rstrip()
        start = stripped.rfind(MARKER_OPEN)
        if start < 0 or not stripped.endswith(MARKER_CLOSE) or MARKER_CLOSE in stripped[start:-1]:
            return content
        reason = stripped[start + len(MARKER_OPEN):-1].strip()
        if not self.flagged:
            guard.report_off_purpose(scope.user, self.turn.pk, reason)
            self.flagged = True
        return stripped[:start].rstrip()

    # -- checks ------------------------------------------------------------------

    def checkpoint(self, *, locks_too: bool = False) -> None:
        """Stop asked or deadline passed → end now; with ``locks_too``, a lost lease too. One query."""
        lease = Lock.objects.filter(holder=self.turn.pk, name__in=locks.turn_locks(self.turn),
                                    expires_at__gt=timezone.now())
        row = (
            Turn.objects.filter(pk=self.turn.pk)
            .annotate(leases=Subquery(lease.order_by().values("holder").annotate(n=Count("name")).values("n")[:1]))
            .values("stop_requested_at", "leases")
            .first()
        )
        if row is None:
            raise TurnEnded(End(Status.FAILED, "chat_gone"))
        if row["stop_requested_at"] is not None:
            raise TurnEnded(End(Status.STOPPED))
        if timezone.now() >= self.turn.deadline_at:
            raise TurnEnded(End(Status.DEADLINE))
        if locks_too and (row["leases"] or 0) < len(locks.turn_locks(self.turn)):
            raise TurnEnded(End(Status.FAILED, "lock_lost"))

    def recheck(self, *, chat: bool = True) -> Scope:
        """Round step a: the session, the chat and the module, afresh (the locks: ``checkpoint``)."""
        try:
            scope = authorize_session(self.ref, impersonated=False)
            if chat:  # right after a stored message the chat is known to be there
                owned_conversation(scope, self.turn.conversation_id)
        except NotFound:
            raise TurnEnded(End(Status.FAILED, "chat_gone")) from None
        except Forbidden:
            raise TurnEnded(End(Status.FAILED, "forbidden")) from None
        except Refusal:
            raise TurnEnded(End(Status.FAILED, "session_ended")) from None
        return scope

    # -- storing -------------------------------------------------------------------

    def _store_answer(self, answer_id: uuid.UUID, content: str, calls: list[ToolCall],
                      completion: Completion) -> Message:
        tool_calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        message = self._store(
            id=answer_id, role=Message.Role.ASSISTANT, content=content, tool_calls=tool_calls or None,
            model=completion.model, input_tokens=completion.input_tokens, output_tokens=completion.output_tokens,
            cost_usd=completion.cost_usd, latency_ms=completion.latency_ms, ai_request_id=completion.request_id,
        )
        entry: dict[str, Any] = {"role": "assistant", "content": content or None}
        if tool_calls:
            entry["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in tool_calls
            ]
        self.this_turn.append(entry)
        return message

    def _store_result(self, call: ToolCall, outcome: str, result: Any, card: Any, answer: Message, number: int) -> None:
        text = json.dumps(result, ensure_ascii=False, default=str)
        limit = agent_settings.TOOL_RESULT_CHARS
        truncated = len(text) > limit
        if truncated:
            text = text[:limit]
        self._store(
            role=Message.Role.TOOL, tool_name=call.name[:64], tool_call_id=call.id[:128], tool_outcome=outcome,
            tool_result=text if truncated else result, tool_result_truncated=truncated, confirmation=card,
            assistant_message=answer,
        )
        message = {"role": "tool", "tool_call_id": call.id, "content": text}
        self.this_turn.append(message)
        self.results.append((number, message))

    def _notice(self, code: str, params: dict[str, Any] | None = None, **fields: Any) -> Message:
        return self._store(role=Message.Role.NOTICE, notice_code=code, notice_params=params or {}, **fields)

    def _store(self, *, title_from: str | None = None, **fields: Any) -> Message:
        """Append a message of this turn, only while the turn still holds the chat's lease."""
        from ..conversations import append_message

        try:
            with transaction.atomic():
                if not locks.fence(self.turn):
                    raise TurnEnded(End(Status.FAILED, "lock_lost"))
                return append_message(self.turn.conversation_id, turn=self.turn, title_from=title_from, **fields)
        except NotFound:
            raise TurnEnded(End(Status.FAILED, "chat_gone")) from None
        except (DatabaseError, ValidationError) as error:
            logger.error("agent turn %s: a %s message was refused (%s)", self.turn.pk, fields.get("role"),
                         type(error).__name__)
            raise StoreFailed() from None


def _denied(message: str) -> dict[str, str]:
    return {"error": "denied", "message": message}


class Heartbeat:
    """Renews the turn's leases every ``LOCK_RENEW_S``, during a long model call too."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"agent-heartbeat-{turn.pk}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        try:
            while not self._stopped.wait(agent_settings.LOCK_RENEW_S):
                if not locks.renew(self.turn):
                    return  # lost: the runner sees it at its next check
        except Exception:
            logger.exception("agent turn %s: heartbeat failed", self.turn.pk)
        finally:
            connection.close()
