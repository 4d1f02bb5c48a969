"""The rounds of one turn, run in the turn's Celery task.

Every write goes through ``_store``, fenced by the chat's lease in the same
transaction (on PostgreSQL the same statement), so a worker that froze past its
lease writes nothing. Each check is one statement compiled once per worker
thread (``statements.Columns``) that reads the session, the rights, the turn and its
leases afresh. On PostgreSQL the checks between a model call and the tool calls
ride in the statements that store: the answer is stored only where the check
after the model call passes, and each tool result's store reads the check
before the next call, so a round with two tool calls costs five statements.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator

from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from .. import confirmations, events, notices
from ..access import Accepted, Check, Scope, actor_of, prepare_check
from ..ai import AIError, Completion, ToolCall, complete, providers, usage
from ..ai.off_purpose import cut_marker, marker_nonce
from ..attachments import pictures
from ..conf import agent_settings
from ..conversations import LeaseLost, append_message
from ..conversations.store import GateClosed, RidingCheck, append_checked
from ..errors import Forbidden, NotFound, Refusal
from ..limits import admission, caps, costs
from ..models import AgentSettings, AIRequest, Confirmation, Conversation, Lock, Message, Turn
from ..statements import Columns, slot
from ..tools import Refused, catalogue, checked_once, execute_as, parse_arguments, registry, visible_for
from ..tools.registry import FIND_TOOLS
from . import history, locks, monitor, stream, versions
from .prompt import system_prompt

logger = logging.getLogger(__name__)
Status = Turn.Status


@dataclass(frozen=True)
class End:
    status: str
    reason: str = ""


class TurnEnded(Exception):
    request_id: Any = None  # set by ``complete`` when it ended a model call: the call's journal row

    def __init__(self, end: End) -> None:
        super().__init__(end.status)
        self.end = end


def run(turn_id: Any) -> None:
    """Claim the turn (a second delivery finds it claimed), run it, and end it however it ends."""
    claimed = claim(turn_id)
    if claimed is None:
        return
    turn = claimed.turn
    end = End(Status.INTERRUPTED, "crashed")
    try:
        with locks.Heartbeat(turn), translation.override(turn.language), checked_once():
            end = TurnRunner(claimed).run()
    except TurnEnded as ended:
        end = ended.end
    except SoftTimeLimitExceeded:
        end = End(Status.DEADLINE)
    except StoreFailed:
        end = End(Status.INTERRUPTED, "store_failed")
    except Exception:
        logger.exception("agent turn %s crashed", turn.pk)
    finally:
        with translation.override(turn.language):
            if not monitor.end_turn(turn, end.status, reason=end.reason):
                _log_ended_elsewhere(turn, end)


def _log_ended_elsewhere(turn: Turn, end: End) -> None:
    """A worker whose turn was ended meanwhile (by the sweep, or for a newer turn) logs how it really
    ended and what the worker saw, not the end it would have given it."""
    ended = Turn.objects.filter(pk=turn.pk).values_list("status", "end_reason").first() or ("deleted", "")
    logger.info(
        "agent turn %s had already ended: %s %s; its worker stopped later (%s %s)",
        turn.pk,
        *ended,
        end.status,
        end.reason,
    )


@dataclass(frozen=True)
class Claimed:
    """A turn its worker has just claimed, with what its start needs to know, read in the same transaction."""

    turn: Turn
    leases_held: bool  # its leases extended, none taken over
    lapsed_cards: bool  # the chat has waiting cards past their time


def claim(turn_id: Any) -> Claimed | None:
    """``queued`` → ``running`` in one conditional UPDATE; None when someone has it."""
    try:
        pk = uuid.UUID(str(turn_id))
    except ValueError:
        return None
    now = timezone.now()
    lapsed = Confirmation.objects.filter(
        conversation_id=OuterRef("conversation_id"), status=Confirmation.Status.WAITING, expires_at__lte=now
    )
    with transaction.atomic():  # the sweep sees the turn queued, or running with its leases back
        extended = _mark_running(pk, now)  # and its leases extended: one that ran out while queued, unless taken
        if extended is None:
            return None
        turn = (
            Turn.objects.select_related("endpoint", "conversation", "user")
            .annotate(agent_lapsed_cards=Exists(lapsed))
            .get(pk=pk)
        )
        claimed = Claimed(
            turn,
            leases_held=extended == len(locks.turn_locks(turn)),
            lapsed_cards=turn.agent_lapsed_cards,
        )
    events.turn_changed(turn.conversation_id, turn.pk, Status.RUNNING)
    return claimed


def _mark_running(pk: uuid.UUID, now: Any) -> int | None:
    """``queued`` → ``running`` and the turn's leases extended (``locks.reclaim``): how many were,
    or None when the turn was not queued. One statement on PostgreSQL."""
    if connection.vendor != "postgresql":
        if not Turn.objects.filter(pk=pk, status=Status.QUEUED).update(status=Status.RUNNING, started_at=now):
            return None
        return locks.reclaim_holder(pk)
    quote, turn, lock = connection.ops.quote_name, Turn._meta, Lock._meta
    sql = (
        f"WITH agent_claimed AS (UPDATE {quote(turn.db_table)} SET {quote('status')} = %s, {quote('started_at')} = %s"
        f" WHERE {quote('id')} = %s AND {quote('status')} = %s RETURNING {quote('id')}),"
        f" agent_leases AS (UPDATE {quote(lock.db_table)} SET {quote('expires_at')} = {locks.lease_end_sql()}"
        f" WHERE {quote('holder')} = %s AND EXISTS (SELECT 1 FROM agent_claimed) RETURNING 1)"
        f" SELECT (SELECT COUNT(*) FROM agent_claimed), (SELECT COUNT(*) FROM agent_leases)"
    )
    at = turn.get_field("started_at").get_db_prep_value(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [Status.RUNNING, at, pk, Status.QUEUED, pk])
        claimed, extended = cursor.fetchone()
    return int(extended) if claimed else None


class StoreFailed(Exception):
    """The database refused a message; the log gets field names and codes only."""


class TurnRunner:
    def __init__(self, claimed: Claimed) -> None:
        self.claimed = claimed
        self.turn = turn = claimed.turn
        # None when the endpoint was deleted since the start: the call then fails as not configured
        self.adapter = providers.adapter_for(turn.endpoint) if turn.endpoint is not None else None
        self.ref = actor_of(turn)  # the session or Telegram link it runs for, checked at every step
        self.this_turn: list[dict[str, Any]] = []
        self.results: list[tuple[int, dict[str, Any]]] = []  # (round, tool message for the model)
        self.flagged = False
        self.marker_nonce = marker_nonce()  # in this turn's prompt: only a marker with it flags the turn
        self.budget = costs.Verdict()
        self.site_prompt = ""
        self.files: list[Any] = []  # the files linked to the user's message
        self.pictures: list[Any] = []  # this turn's pictures, sent as image parts in its own rounds only
        self.user_parts: Any = None
        self.accepted = Accepted()  # the session data and password hash this turn's checks passed
        # what the check that rode with the last store read, for the next step: judged, or still to judge
        self.checked: Scope | tuple[Check, Any] | None = None
        self.kept_tools: list[str] = []  # found or called this turn: offered in its later rounds

    # -- the turn ----------------------------------------------------------------

    def run(self) -> End:
        """The user's message first, then the rounds, each after its re-check.

        Runs a turn that ``claim`` returned: its own state was read there, just now.
        """
        self.verify_claimed()
        if self.claimed.lapsed_cards:
            with self.fenced():  # before the chat is read, so a lapsed card does not read as waiting
                confirmations.settle_lapsed(self.turn.conversation_id)
        limit = agent_settings.HISTORY_CHARS
        if self.turn.attachment_ids or self.turn.user_message_id:
            files = self.files = self._store_users_message_with_files()
            current = {"role": "user", "content": history.user_content(self.turn.text, files, limit)}
            self.history = history.load(self.turn.conversation_id, current, limit, before_seq=self.user_message.seq)
            self.pictures = pictures.pictures_of(files)
            if self.pictures and not pictures.sees_pictures(self.turn.endpoint):
                return self._without_pictures_end()
            self.user_parts = pictures.user_parts(current["content"], self.pictures)
        else:
            current = {"role": "user", "content": history.user_content(self.turn.text, [], limit)}
            self.history = history.load(self.turn.conversation_id, current, limit)
            self._store_users_message()
        if (fallback := notices.fallback_to_tell(self.turn)) is not None:
            self._notice(notices.ENDPOINT_FALLBACK, fallback)  # told once, after the message it answers
        rounds = agent_settings.MAX_TOOL_ROUNDS
        for number in range(1, rounds + 1):
            scope = self.verify(budget=True)
            if number == 1:
                own = scope.user_settings
                instructions = own.instructions if own else ""
                self.system = system_prompt(scope.user, self.site_prompt, instructions, self.marker_nonce)
            if not self.round(scope, number, last=number == rounds):
                return End(Status.FINISHED)
        self._notice("max_rounds")
        return End(Status.FINISHED, "max_rounds")

    def round(self, scope: Scope, number: int, *, last: bool) -> bool:
        """One model call and its tool calls; False when the turn is over."""
        tools_allowed = not last and self.adapter is not None and self.adapter.takes_tools()
        shown = catalogue.offer(scope, self.ranking_text(), keep=self.kept_tools) if tools_allowed else []
        answer_id = uuid.uuid4()
        followers = stream.followers(self.turn, answer_id)  # front ends besides the page that show the draft
        draft = stream.Draft(self.turn.conversation_id, self.turn.pk, number, check=self.verify, followers=followers)
        try:
            with usage.stored_by_caller(answer_id), contextlib.closing(draft):
                completion = complete(
                    self.turn.endpoint,
                    self.request_messages(number),
                    tools=[t.definition(scope) for t in shown] or None,
                    user=scope.user,
                    source="agent",
                    task="agent.chat",
                    admission=self.turn.admission or None,
                    attribution={"message": str(answer_id), "turn": str(self.turn.pk)},
                    capture=agent_settings.CAPTURE_CONTENT and not self.pictures,  # never a turn's pictures
                    deadline=self.turn.deadline_at,
                    budget=self.budget,
                    on_chunk=draft,
                    watch=draft.watch,
                )
        except TurnEnded as ended:  # what the turn's check raised while the model wrote
            self._keep_partial(ended.end, answer_id, draft.text, ended.request_id)
            raise
        except AIError as error:
            if error.code == "deadline":
                self._keep_partial(End(Status.DEADLINE), answer_id, draft.text, error.request_id)
                raise TurnEnded(End(Status.DEADLINE)) from None
            if number == 1 and self.pictures and self.adapter and self.adapter.refused_pictures(error):
                self._take_pictures_off(pictures_only=True)  # refused with them: once more, without
                return self.round(scope, number, last=last)
            self.verify()
            journal_row = None if error.refused else error.request_id  # a refused call reached no sink
            params = error.params()
            if error.limit:  # which cap, how much of it is used, and when it frees up
                params.update(caps.standing(scope.user, error.limit).params())
            self._notice(notices.MODEL_FAILED, params, ai_request_id=journal_row)
            raise TurnEnded(End(Status.FAILED, "model_failed")) from None
        # Rights lost or a stop asked during the model call: nothing more from it. The check rides
        # with the store of what the model said, which it guards.
        content, off_purpose = cut_marker(completion.content, self.marker_nonce)
        calls = [c for c in completion.tool_calls if c.name]
        try:
            if not content.strip() and not calls:
                fields = {"ai_request_id": completion.request_id, "off_purpose": off_purpose}
                self._notice("empty_answer", check="guard", **fields)
                return False
            answer = self._store_answer(answer_id, content, calls, completion, off_purpose)
        except TurnEnded as ended:
            self._keep_partial(ended.end, answer_id, draft.text, completion.request_id)
            raise
        if not calls:
            return False
        return not self.run_calls(calls, {t.name for t in shown}, answer, number)

    def run_calls(self, calls: list[ToolCall], shown: set[str], answer: Message, number: int) -> bool:
        """Run the answer's tool calls in order, each after a fresh check of the session, the
        stop mark and the leases; True when a write now waits (the turn ends)."""
        ids = Counter(c.id for c in calls)
        waiting = False
        for index, call in enumerate(calls):
            scope = self.fresh_scope()
            then = "along" if index + 1 < len(calls) else None  # the check before the next call rides with this result
            tool = registry.get(call.name)
            is_write = tool is not None and tool.kind == "write"
            if index >= agent_settings.MAX_TOOL_CALLS_PER_ROUND:
                outcome, result, card = "denied", _denied(_("Too many tool calls in one answer.")), None
            elif not self.may_call(scope, call.name, shown):
                outcome, result, card = "denied", _denied(_("This tool is not available.")), None
            elif waiting:
                reason = _("Confirm the earlier change first.") if is_write else _("Held for confirmation.")
                outcome, result, card = "denied", _denied(reason), None
            elif is_write and ids[call.id] > 1:
                outcome, result, card = "denied", _denied(_("Another call of this answer has the same id.")), None
            else:
                with self.fenced() if is_write else contextlib.nullcontext():  # a card only with its tool message
                    outcome, result, card = self.execute(scope, call)
                    self._store_result(call, outcome, result, card, answer, number, check=then)
                waiting = outcome == "needs_confirmation"
                continue
            self._store_result(call, outcome, result, card, answer, number, check=then)
        return waiting

    @staticmethod
    def may_call(scope: Scope, name: str, shown: set[str]) -> bool:
        """Whether a call reaches its tool: in a round that offered tools, any tool the user may use
        now (a search found it, or the model knew it), and ``find_tools`` where it was offered."""
        if not shown:
            return False
        return name in shown if name == FIND_TOOLS else bool(visible_for(scope, allow=[name]))

    def execute(self, scope: Scope, call: ToolCall) -> tuple[str, Any, Any]:
        """Run one call; a write only inside the caller's fenced transaction, so its card is stored
        while the turn holds the chat and together with the tool message that names it."""
        try:
            args = parse_arguments(call.arguments)
        except Refused as refused:
            return refused.outcome, refused.result, None
        if call.name == FIND_TOOLS:
            found = catalogue.find_tools(scope, args)
            self.kept_tools += [t["name"] for t in found.result.get("tools", [])] if found.outcome == "ok" else []
            return found.outcome, found.result, None
        self.kept_tools.append(call.name)
        result = execute_as(
            scope,
            call.name,
            args,
            allow="all",
            via="agent",
            chat=self.turn.conversation,
            call_id=call.id,
            turn=self.turn,
        )
        return result.outcome, result.result, result.confirmation

    # -- the request -------------------------------------------------------------

    def ranking_text(self) -> str:
        """What the tools offered are ranked for: the user's message, then the messages before it,
        newest first, within ``TOOLS_RANK_CHARS``."""
        room = agent_settings.TOOLS_RANK_CHARS
        texts = [self.turn.text[:room]]
        room -= len(texts[0])
        for entry in reversed(self.history[:-1]):
            if room <= 0:
                break
            content = entry["content"] if isinstance(entry.get("content"), str) else ""
            texts.append(content[:room])
            room -= len(texts[-1]) or 1
        return "\n".join(texts)

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
        stub = _("[left out: an earlier result of this turn, too long to send again]")
        turn_messages = [
            m if m.get("role") != "tool" or id(m) in whole else {**m, "content": stub} for m in self.this_turn
        ]
        earlier = pictures.with_pictures(self.history, self.user_parts) if self.pictures else self.history
        return [{"role": "system", "content": self.system}, *earlier, *turn_messages]

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
                self.ref, impersonated=False, annotations=ROUND_CHECK if budget else STEP_CHECK, values=values
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

    def verify_claimed(self) -> None:
        """The turn's own state as ``claim`` read it: before the user's message is stored, which a
        session that ended since ``start`` must not lose."""
        held = self.claimed.leases_held
        self._judge(
            {
                "agent_turn_status": Status.RUNNING,
                "agent_stop_asked": self.turn.stop_requested_at is not None,
                "agent_leases": len(locks.turn_locks(self.turn)) if held else 0,
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
    def fenced(self) -> Iterator[None]:
        """A transaction that writes only while the turn still holds the chat's lease."""
        with transaction.atomic():
            if not locks.fence(self.turn):
                raise TurnEnded(End(Status.FAILED, "lock_lost"))
            yield

    # -- storing -------------------------------------------------------------------

    def _store_answer(
        self, answer_id: uuid.UUID, content: str, calls: list[ToolCall], completion: Completion, off_purpose: str | None
    ) -> Message:
        tool_calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        message = self._store(
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
        entry: dict[str, Any] = {"role": "assistant", "content": content or None}
        if tool_calls:
            entry["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in tool_calls
            ]
        self.this_turn.append(entry)
        return message

    def _keep_partial(self, end: End, answer_id: uuid.UUID, shown: str, request_id: Any) -> None:
        """On a stop or the deadline, the answer as far as it had streamed (``shown``: the draft,
        a marker it may be beginning held back) is stored, the call's journal row linked to it.

        Nothing on a revocation (the user may no longer see it), nothing when no text had come,
        and never a tool call: those that came were not all received, or are not to run.
        """
        if end.status not in (Status.STOPPED, Status.DEADLINE) or not shown.strip():
            return
        usage_of_call = AIRequest.objects.filter(pk=request_id).values(*_PARTIAL_USAGE).first() if request_id else None
        self._store(
            id=answer_id,
            role=Message.Role.ASSISTANT,
            content=shown,
            partial=True,
            ai_request_id=request_id,
            **(usage_of_call or {}),
        )

    def _store_result(
        self, call: ToolCall, outcome: str, result: Any, card: Any, answer: Message, number: int, *, check: str | None
    ) -> None:
        text = json.dumps(result, ensure_ascii=False, default=str)  # what the model is sent, and stored
        limit = agent_settings.TOOL_RESULT_CHARS
        truncated = len(text) > limit
        if truncated:
            text = text[:limit]
        self._store(
            role=Message.Role.TOOL,
            tool_name=call.name[:64],
            tool_call_id=call.id[:128],
            tool_outcome=outcome,
            tool_result=text if truncated else json.loads(text),
            tool_result_truncated=truncated,
            confirmation=card,
            assistant_message=answer,
            check=check,
        )
        message = {"role": "tool", "tool_call_id": call.id, "content": text}
        self.this_turn.append(message)
        self.results.append((number, message))

    def _store_users_message_with_files(self) -> list[Any]:
        """The user's message and the link of its files, in one fenced transaction; the files
        linked (those the user removed meanwhile are not). A turn that answers a stored message
        again stores none: it reads that one and its files."""
        if self.turn.user_message_id:
            self.user_message, files = versions.asked_again(self.turn)
            return files
        with self.fenced():
            self.user_message = self._store_users_message()
            return versions.link_files(self.turn, self.user_message)

    def _store_users_message(self) -> Message:
        text = self.turn.text
        return self._store(
            role=Message.Role.USER, content=text, title_from=text, users_own=True, spoken=self.turn.spoken
        )

    def _without_pictures_end(self) -> End:
        """A model not known to take images is never called: the files go back to the composer
        (those of a message answered again stay with it)."""
        self._take_pictures_off(pictures_only=False)
        return End(Status.FINISHED, "pictures_not_seen")

    def _take_pictures_off(self, *, pictures_only: bool) -> None:
        """Unlink the files (or only the pictures) from the user's message and say so, in one fenced
        transaction; from now on this turn's requests, and every later history, go without them.
        A message answered again (a regenerate) keeps its files: they are an earlier turn's."""
        with self.fenced():
            if self.user_message.turn_id == self.turn.pk:
                pictures.unlink(self.user_message, pictures_only=pictures_only)
            self._notice("pictures_not_seen")
        kept = [f for f in self.files if not f.is_picture] if pictures_only else []
        content = history.user_content(self.turn.text, kept, agent_settings.HISTORY_CHARS)
        self.history = [*self.history[:-1], {**self.history[-1], "content": content}]
        self.pictures, self.user_parts = [], None

    def _notice(
        self, code: str, params: dict[str, Any] | None = None, *, check: str | None = None, **fields: Any
    ) -> Message:
        fields.update(role=Message.Role.NOTICE, notice_code=code, notice_params=params or {})
        return self._store(check=check, **fields)

    def _store(
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
                chat, turn = self.turn.conversation_id, self.turn
                if riding is None:
                    message = append_message(
                        chat, turn=turn, title_from=title_from, lease=lease, link_turn=users_own, **fields
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
            chat, turn = self.turn.conversation_id, self.turn  # session was saved since: store as it passed
            return append_message(chat, turn=turn, lease=lease, **fields)
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
    chat = Conversation.objects.filter(pk=slot("chat", Conversation._meta.pk)).order_by()
    columns = {
        "agent_turn_status": Subquery(turn.values("status")[:1]),
        "agent_stop_asked": Exists(turn.filter(stop_requested_at__isnull=False)),
        "agent_leases": locks.leases_held(turn_pk),
        "agent_chat_owner": Subquery(chat.exclude(status=Conversation.Status.DELETED).values("user_id")[:1]),
    }
    if budget:
        columns.update(costs.budget_columns())
        columns["agent_site_prompt"] = Subquery(AgentSettings.objects.order_by().values("system_prompt")[:1])
    return columns


STEP_CHECK = Columns("agent.turn.step", lambda: _turn_columns(budget=False))
ROUND_CHECK = Columns("agent.turn.round", lambda: _turn_columns(budget=True))


def _denied(message: str) -> dict[str, str]:
    return {"error": "denied", "message": message}
