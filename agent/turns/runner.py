"""The rounds of one turn, run in the turn's Celery task.

The worker claims the turn, stores the user's message, then runs its rounds: a check,
the model call, the answer stored, its tool calls run and their results stored, until
an answer calls no tool, a write waits for its card, or the rounds run out. Every check
and every write goes through the turn's ``fenced.Fence``, which ends the turn where the
worker no longer holds the chat's lease or the user's rights.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from .. import confirmations, notices
from ..access import Scope
from ..ai import AIError, ToolCall, complete, providers, usage
from ..ai.off_purpose import cut_marker, marker_nonce
from ..attachments import pictures
from ..core import events
from ..core.conf import agent_settings
from ..core.ids import TurnId
from ..limits import caps
from ..models import Confirmation, Lock, Message, Turn
from ..tools import Refused, catalogue, checked_once, execute_as, parse_arguments, registry, visible_for
from ..tools.registry import FIND_TOOLS
from . import history, locks, monitor, stream, versions
from .fenced import End, Fence, StoreFailed, TurnEnded
from .prompt import system_prompt
from .watcher import watcher

logger = logging.getLogger(__name__)
Status = Turn.Status


def run(turn_id: TurnId) -> None:
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
    lapsed_confirmations: bool  # the chat has waiting cards past their time


def claim(turn_id: TurnId) -> Claimed | None:
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
            lapsed_confirmations=turn.agent_lapsed_cards,
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


class TurnRunner:
    def __init__(self, claimed: Claimed) -> None:
        self.claimed = claimed
        self.turn = turn = claimed.turn
        # None when the endpoint was deleted since the start: the call then fails as not configured
        self.adapter = providers.adapter_for(turn.endpoint) if turn.endpoint is not None else None
        self.fence = Fence(turn)  # every check and every write of the turn
        self.this_turn: list[dict[str, Any]] = []
        self.results: list[tuple[int, dict[str, Any]]] = []  # (round, tool message for the model)
        self.marker_nonce = marker_nonce()  # in this turn's prompt: only a marker with it flags the turn
        self.files: list[Any] = []  # the files linked to the user's message
        self.pictures: list[Any] = []  # this turn's pictures, sent as image parts in its own rounds only
        self.user_parts: Any = None
        self.kept_tools: list[str] = []  # found or called this turn: offered in its later rounds

    # -- the turn ----------------------------------------------------------------

    def run(self) -> End:
        """The user's message first, then the rounds, each after its re-check.

        Runs a turn that ``claim`` returned: its own state was read there, just now.
        """
        self.fence.verify_claimed(leases_held=self.claimed.leases_held)
        if self.claimed.lapsed_confirmations:
            with self.fence.atomic():  # before the chat is read, so a lapsed card does not read as waiting
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
            self.fence.notice(notices.ENDPOINT_FALLBACK, fallback)  # told once, after the message it answers
        rounds = agent_settings.MAX_TOOL_ROUNDS
        for number in range(1, rounds + 1):
            scope = self.fence.verify(budget=True)
            if number == 1:
                own = scope.user_settings
                instructions = own.instructions if own else ""
                self.system = system_prompt(scope.user, self.fence.site_prompt, instructions, self.marker_nonce)
            if not self.round(scope, number, last=number == rounds):
                return End(Status.FINISHED)
        self.fence.notice("max_rounds")
        return End(Status.FINISHED, "max_rounds")

    def round(self, scope: Scope, number: int, *, last: bool) -> bool:
        """One model call and its tool calls; False when the turn is over."""
        tools_allowed = not last and self.adapter is not None and self.adapter.takes_tools()
        shown = catalogue.offer(scope, self.ranking_text(), keep=self.kept_tools) if tools_allowed else []
        answer_id = uuid.uuid4()
        followers = stream.followers(self.turn, answer_id)  # front ends besides the page that show the draft
        draft = stream.Draft(
            self.turn.conversation_id,
            self.turn.pk,
            number,
            check=self.fence.verify,
            followers=followers,
            watched=watcher.watch(self.turn, self.fence.actor),
        )
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
                    budget=self.fence.budget,
                    on_chunk=draft,
                    watch=draft.watch,
                )
        except TurnEnded as ended:  # what the turn's check raised while the model wrote
            self.fence.keep_partial(ended.end, answer_id, draft.text, ended.request_id)
            raise
        except AIError as error:
            if error.code == "deadline":
                self.fence.keep_partial(End(Status.DEADLINE), answer_id, draft.text, error.request_id)
                raise TurnEnded(End(Status.DEADLINE)) from None
            if number == 1 and self.pictures and self.adapter and self.adapter.refused_pictures(error):
                self._take_pictures_off(pictures_only=True)  # refused with them: once more, without
                return self.round(scope, number, last=last)
            self.fence.verify()
            journal_row = None if error.refused else error.request_id  # a refused call reached no sink
            params = error.params()
            if error.limit:  # which cap, how much of it is used, and when it frees up
                params.update(caps.standing(scope.user, error.limit).params())
            self.fence.notice(notices.MODEL_FAILED, params, ai_request_id=journal_row)
            raise TurnEnded(End(Status.FAILED, "model_failed")) from None
        # Rights lost or a stop asked during the model call: nothing more from it. The check rides
        # with the store of what the model said, which it guards.
        content, off_purpose = cut_marker(completion.content, self.marker_nonce)
        calls = [c for c in completion.tool_calls if c.name]
        try:
            if not content.strip() and not calls:
                fields = {"ai_request_id": completion.request_id, "off_purpose": off_purpose}
                self.fence.notice("empty_answer", check="guard", **fields)
                return False
            answer = self.fence.store_answer(answer_id, content, calls, completion, off_purpose)
        except TurnEnded as ended:
            self.fence.keep_partial(ended.end, answer_id, draft.text, completion.request_id)
            raise
        self.this_turn.append(_answer_entry(content, calls))
        if not calls:
            return False
        return not self.run_calls(calls, {t.name for t in shown}, answer, number)

    def run_calls(self, calls: list[ToolCall], shown: set[str], answer: Message, number: int) -> bool:
        """Run the answer's tool calls in order, each after a fresh check of the session, the
        stop mark and the leases; True when a write now waits (the turn ends)."""
        ids = Counter(c.id for c in calls)
        waiting = False
        for index, call in enumerate(calls):
            scope = self.fence.fresh_scope()
            then = "along" if index + 1 < len(calls) else None  # the check before the next call rides with this result
            tool = registry.get(call.name)
            is_write = tool is not None and tool.kind == "write"
            if index >= agent_settings.MAX_TOOL_CALLS_PER_ROUND:
                outcome, result, confirmation = "denied", _denied(_("Too many tool calls in one answer.")), None
            elif not self.may_call(scope, call.name, shown):
                outcome, result, confirmation = "denied", _denied(_("This tool is not available.")), None
            elif waiting:
                reason = _("Confirm the earlier change first.") if is_write else _("Held for confirmation.")
                outcome, result, confirmation = "denied", _denied(reason), None
            elif is_write and ids[call.id] > 1:
                outcome, result, confirmation = (
                    "denied",
                    _denied(_("Another call of this answer has the same id.")),
                    None,
                )
            else:
                with self.fence.atomic() if is_write else contextlib.nullcontext():  # a card only with its tool message
                    outcome, result, confirmation = self.execute(scope, call)
                    self._store_result(call, outcome, result, confirmation, answer, number, check=then)
                waiting = outcome == "needs_confirmation"
                continue
            self._store_result(call, outcome, result, confirmation, answer, number, check=then)
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

    # -- storing -------------------------------------------------------------------

    def _store_result(
        self,
        call: ToolCall,
        outcome: str,
        result: Any,
        confirmation: Any,
        answer: Message,
        number: int,
        *,
        check: str | None,
    ) -> None:
        text = self.fence.store_result(call, outcome, result, confirmation, answer, check=check)
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
        with self.fence.atomic():
            self.user_message = self._store_users_message()
            return versions.link_files(self.turn, self.user_message)

    def _store_users_message(self) -> Message:
        text = self.turn.text
        return self.fence.store(
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
        with self.fence.atomic():
            if self.user_message.turn_id == self.turn.pk:
                pictures.unlink(self.user_message, pictures_only=pictures_only)
            self.fence.notice("pictures_not_seen")
        kept = [f for f in self.files if not f.is_picture] if pictures_only else []
        content = history.user_content(self.turn.text, kept, agent_settings.HISTORY_CHARS)
        self.history = [*self.history[:-1], {**self.history[-1], "content": content}]
        self.pictures, self.user_parts = [], None


def _answer_entry(content: str, calls: list[ToolCall]) -> dict[str, Any]:
    """The answer as the turn's later rounds send it to the model again."""
    entry: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        entry["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ]
    return entry


def _denied(message: str) -> dict[str, str]:
    return {"error": "denied", "message": message}
