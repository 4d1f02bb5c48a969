"""Starting a turn: every check it needs, the chat's lock and a user slot, the turn stored and queued
on commit; and asking a chat's live turn to stop."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Iterable, Protocol

from django.db import transaction
from django.utils import timezone
from django.utils.translation import get_language

from .. import attachments
from ..access import Actor, actor_fields, language_for
from ..ai import effective
from ..conversations import authorize_conversation, validate_user_text
from ..core import events
from ..core.conf import agent_settings
from ..core.errors import Blocked, BudgetExceeded, Busy, NotConfigured, TooManyTurns
from ..core.ids import ConversationId
from ..limits import caps
from ..limits.admission import admit
from ..models import AgentSettings, Attachment, Conversation, Turn
from . import locks, monitor


class Branch(Protocol):
    """How a version's door (``versions``) shapes the turn it starts."""

    def prepare(self, scope: Any, conversation: Conversation) -> tuple[str, list[Attachment]]:
        """The turn's text and files, after the chat's checks; refusals as ``start``'s."""

    def apply(self, turn: Turn) -> None:
        """Move the chat's line for the turn, in its start's transaction, under the chat's lock."""


def start(
    actor: Actor,
    conversation_id: ConversationId,
    text: Any,
    *,
    attachment_ids: Iterable[Any] = (),
    impersonated: bool,
    language: str | None = None,
    branch: Branch | None = None,
    spoken: bool = False,
) -> Turn:
    """Check everything a turn needs, take the chat's lock, and queue the turn's task on commit.

    ``branch`` is for the doors of ``versions``: a turn on a new version of a message. ``spoken``:
    the text was transcribed from a voice note the user sent unseen; their message is marked so."""
    scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    if branch is None:
        text = validate_user_text(text)
        files = attachments.for_turn(scope, conversation, attachment_ids)
    else:
        text, files = branch.prepare(scope, conversation)
    site = AgentSettings.current()
    pictures = any(f.is_picture for f in files)
    choice = effective(scope.user, pictures=pictures, user_settings=scope.user_settings, site=site)
    endpoint = choice.endpoint
    if endpoint is None or not endpoint.enabled:
        raise NotConfigured()
    monitor.sweep(conversation.pk)
    try:
        admission = admit(scope.user, "agent.chat", site=site, user_settings=scope.user_settings)
    except (BudgetExceeded, Blocked) as refusal:
        raise caps.explained(refusal, scope.user) from None  # which limit, how much, when it frees up
    turn_id = uuid.uuid4()
    with transaction.atomic():
        if not locks.take(locks.chat_lock(conversation.pk), turn_id):
            raise Busy()
        slot = locks.take_user_slot(scope.user_id, turn_id)
        if slot is None:
            raise caps.explained(TooManyTurns(), scope.user)
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
            spoken=spoken,
            **actor_fields(actor),
            user_slot=slot,
            admission=admission,
            deadline_at=timezone.now() + timedelta(seconds=agent_settings.TURN_DEADLINE_S),
        )
        if branch is not None:
            branch.apply(turn)
        events.turn_changed(conversation.pk, turn.pk, Turn.Status.QUEUED)
        transaction.on_commit(lambda: monitor.queue(turn))
    return turn


def stop(actor: Actor, conversation_id: ConversationId, *, impersonated: bool) -> bool:
    """Ask the chat's live turn to stop; True when one was asked."""
    _scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    live = Turn.objects.filter(conversation=conversation, status__in=Turn.LIVE).values_list("pk", flat=True)
    return any([monitor.request_stop(pk) for pk in live])


def live_turn(conversation_id: ConversationId) -> Turn | None:
    """The chat's queued or running turn, if any (the page shows its Stop button)."""
    return Turn.objects.filter(conversation_id=conversation_id, status__in=Turn.LIVE).first()
