"""Turns: start one, stop one (SPEC §3). The rounds are ``agent.turns.runner``'s."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Iterable

from django.db import transaction
from django.utils import timezone
from django.utils.translation import get_language

from .. import attachments, events
from ..access import SessionRef, language_for
from ..ai import effective, guard, limits
from ..conf import agent_settings
from ..conversations import authorize_conversation, validate_user_text
from ..errors import Blocked, BudgetExceeded, Busy, NotConfigured, TooManyTurns
from ..models import Turn
from . import locks, monitor


def start(
    ref: SessionRef,
    conversation_id: Any,
    text: Any,
    *,
    attachment_ids: Iterable[Any] = (),
    impersonated: bool,
    language: str | None = None,
) -> Turn:
    """Check everything a turn needs, take the chat's lock, and queue the turn's task on commit."""
    scope, conversation = authorize_conversation(ref, conversation_id, impersonated=impersonated)
    text = validate_user_text(text)
    files = attachments.for_turn(scope, conversation, attachment_ids)
    choice = effective(scope.user, pictures=any(f.is_picture for f in files), user_settings=scope.user_settings)
    endpoint = choice.endpoint
    if endpoint is None or not endpoint.enabled:
        raise NotConfigured()
    monitor.sweep(conversation.pk)
    try:
        admission = guard.admit(scope.user, "agent.chat")
    except (BudgetExceeded, Blocked) as refusal:
        raise limits.explained(refusal, scope.user) from None  # which limit, how much, when it frees up
    turn_id = uuid.uuid4()
    with transaction.atomic():
        if not locks.take(locks.chat_lock(conversation.pk), turn_id):
            raise Busy()
        slot = locks.take_user_slot(scope.user_id, turn_id)
        if slot is None:
            raise limits.explained(TooManyTurns(), scope.user)
        turn = Turn.objects.create(
            id=turn_id,
            conversation=conversation,
            user=scope.user,
            language=language_for(scope.user_settings, language or get_language()),
            endpoint=endpoint,
            endpoint_source=choice.source,
            endpoint_reason=choice.reason,
            text=text,
            attachment_ids=[str(f.pk) for f in files],
            session_key=ref.session_key,
            user_slot=slot,
            admission=admission,
            deadline_at=timezone.now() + timedelta(seconds=agent_settings.TURN_DEADLINE_S),
        )
        events.turn_changed(conversation.pk, turn.pk, Turn.Status.QUEUED)
        transaction.on_commit(lambda: monitor.queue(turn))
    return turn


def stop(ref: SessionRef, conversation_id: Any, *, impersonated: bool) -> bool:
    """Ask the chat's live turn to stop; True when one was asked."""
    _scope, conversation = authorize_conversation(ref, conversation_id, impersonated=impersonated)
    live = Turn.objects.filter(conversation=conversation, status__in=Turn.LIVE).values_list("pk", flat=True)
    return any([monitor.request_stop(pk) for pk in live])


def live_turn(conversation_id: Any) -> Turn | None:
    """The chat's queued or running turn, if any (the page shows its Stop button)."""
    return Turn.objects.filter(conversation_id=conversation_id, status__in=Turn.LIVE).first()
