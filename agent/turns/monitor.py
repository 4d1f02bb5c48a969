"""How a turn ends: one function for every way, and the sweep for dead workers."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import current_app
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from .. import attachments, notices
from ..conversations import append_message
from ..core import events
from ..core.conf import agent_settings
from ..core.errors import NotFound
from ..core.ids import ConversationId, TurnId
from ..models import Conversation, Message, Turn
from . import locks

logger = logging.getLogger(__name__)
Status = Turn.Status
RUN_TURN = "agent.run_turn"

NOTICE_FOR: dict[str, str] = {
    Status.STOPPED: "stopped",
    Status.DEADLINE: "deadline",
    Status.INTERRUPTED: "interrupted",
}
NOTICE_FOR_REASON = {"session_ended": "session_ended", "forbidden": "forbidden", "lock_lost": "lock_lost"}


def end_turn(turn: Turn, status: str, *, reason: str = "") -> bool:
    """Mark the turn ended, write the notice its end calls for, free its locks, tell the tabs.

    Idempotent: the first caller (the task's ``finally`` or the sweep) does it all.
    """
    notice = NOTICE_FOR.get(status) or NOTICE_FOR_REASON.get(reason)
    with transaction.atomic():
        ended = Turn.objects.filter(pk=turn.pk, status__in=Turn.LIVE).update(
            status=status, end_reason=reason, ended_at=timezone.now(), session_key=""
        )
        if not ended:
            return False
        if status in NOTICE_FOR:
            _keep_users_words(turn)
        if notice:
            notices.write_unless_gone(turn.conversation_id, notice, turn=turn)
        locks.release(turn)
        events.turn_changed(turn.conversation_id, turn.pk, "ended", last_seq=_last_seq_on_line(turn))
    turn.status, turn.end_reason, turn.session_key = status, reason, ""
    logger.info("agent turn %s ended: %s %s", turn.pk, status, reason)
    return True


def _last_seq_on_line(turn: Turn) -> int | None:
    """The ``seq`` of the last message the turn left on the chat's line (None: it left none there)."""
    on_line = Message.objects.filter(conversation_id=turn.conversation_id, turn_id=turn.pk, active=True)
    last: int | None = on_line.aggregate(last=Max("seq"))["last"]
    return last


def _keep_users_words(turn: Turn) -> None:
    """An edit's turn stopped, cut by its deadline or lost before it stored the user's new text
    stores it now, with its files, ahead of its notice: the edited message already left the line,
    so the new text takes its place, as the turn would have stored it. A plain message stopped so
    early is not stored: the page gives its words back to the composer."""
    row = Turn.objects.filter(pk=turn.pk).values("user_message_id", "text", "spoken").get()
    if row["user_message_id"] is not None or not row["text"] or not _line_was_cut_for(turn):
        return
    try:
        with transaction.atomic():
            message = append_message(
                turn.conversation_id,
                role=Message.Role.USER,
                content=row["text"],
                title_from=row["text"],
                turn=turn,
                link_turn=True,
                spoken=row["spoken"],
            )
            attachments.link(turn, message)
    except NotFound:
        pass  # the chat was deleted meanwhile


def _line_was_cut_for(turn: Turn) -> bool:
    """True when the chat's line ends where an edited user message left it: the edit's new
    version was to follow that point."""
    line_end = Conversation.objects.filter(pk=turn.conversation_id).values_list("line_end", flat=True).first()
    parent = Q(parent__isnull=True) if line_end is None else Q(parent_id=line_end)
    return Message.objects.filter(
        parent, conversation_id=turn.conversation_id, role=Message.Role.USER, active=False
    ).exists()


def request_stop(turn_id: TurnId) -> bool:
    """Mark a live turn to stop; the runner looks for the mark at its checkpoints."""
    return bool(
        Turn.objects.filter(pk=turn_id, status__in=Turn.LIVE, stop_requested_at__isnull=True).update(
            stop_requested_at=timezone.now()
        )
    )


def sweep(conversation_id: ConversationId | None = None) -> int:
    """End running turns whose lease ran out (their worker died) as ``interrupted``;
    queue again turns still queued after ``QUEUED_REQUEUE_S``, once per lease. Returns how many ended.

    Leases are judged by the database's clock."""
    now = timezone.now()
    if conversation_id is None:
        leased = locks.live_chat_leases().values("holder")
        dead = list(Turn.objects.filter(status=Status.RUNNING).exclude(pk__in=leased))
    else:
        dead_ids = locks.running_without_lease(conversation_id)
        dead = list(Turn.objects.filter(pk__in=dead_ids)) if dead_ids else []
    for turn in dead:
        end_turn(turn, Status.INTERRUPTED, reason="worker_lost")
    if conversation_id is None:
        _requeue_stale(now)
    return len(dead)


def queue(turn: Turn) -> None:
    """Send the turn's ref to a worker of this site, by the task's stable name, with the deadline as
    Celery's soft time limit."""
    soft = agent_settings.TURN_DEADLINE_S + agent_settings.STOP_GRACE_S
    current_app.send_task(
        RUN_TURN,
        args=(str(turn.pk),),
        queue=agent_settings.TASK_QUEUE,
        soft_time_limit=soft,
        time_limit=soft + agent_settings.STOP_GRACE_S,
    )


def _requeue_stale(now: Any) -> None:
    """Send again each turn queued for longer than ``QUEUED_REQUEUE_S`` whose leases ran out.

    Sending it again extends its leases, so a turn that still waits (busy workers) is sent
    once per lease, not at every sweep; one past its deadline, or whose chat was taken, ends.
    """
    leased = locks.live_leases().values("holder")
    stale = Turn.objects.filter(
        status=Status.QUEUED, created_at__lt=now - timedelta(seconds=agent_settings.QUEUED_REQUEUE_S)
    ).exclude(Q(pk__in=leased) & Q(deadline_at__gt=now))
    for turn in stale:
        if turn.deadline_at <= now or not locks.reclaim(turn):
            end_turn(turn, Status.INTERRUPTED, reason="never_ran")
        else:
            queue(turn)
