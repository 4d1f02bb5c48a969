"""Voice: a user's recording turned into text, for them to read before it is sent (or, from
Telegram, sent as their message, marked as spoken).

``transcribe`` is a door like the chats' own: the actor's checks and the chat's, the recording's
limits, the user's per-minute cap, then the speech endpoint in effect for the user
(``agent.ai.endpoints.speech``). What the recording is and how long it lasts are read from its
bytes (``agent.voice.recordings``), never from its name or what the client says; only audio goes to
the endpoint, named by the format found, and it is never kept.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from .. import notices
from ..access import Actor
from ..ai import AIError, endpoints, speech
from ..conversations import authorize_conversation
from ..core.conf import agent_settings
from ..core.errors import BudgetExceeded, NotConfigured, SpeechFailed
from ..core.ids import ConversationId
from ..limits import caps, quotas
from ..models import UNREAD
from . import recordings

SLACK_S = 1.0
"""A recorder stopped at the limit may report a moment more."""


def transcribe(actor: Actor, conversation_id: ConversationId, audio: Any, *, impersonated: bool) -> str:
    """The words of ``audio`` (bytes, or a file such as the page's ``rec.webm``) recorded for this chat.

    Over ``MAX_VOICE_BYTES`` or ``MAX_VOICE_S``, or empty: ``ValidationError``; not audio, or audio
    whose length cannot be read: ``ValidationError`` ``unsupported_type``; no speech endpoint:
    ``NotConfigured``; ``TRANSCRIPTIONS_PER_MINUTE`` reached: ``TooManyTranscriptions``; the cost
    caps reached: ``BudgetExceeded``; the endpoint failing: ``SpeechFailed`` with the sentence a
    failed model call's notice gives.
    """
    scope, conversation = authorize_conversation(actor, conversation_id, impersonated=impersonated)
    data = _read(audio)
    limit = agent_settings.MAX_VOICE_S
    kind = recordings.audio_format(data)
    length = recordings.seconds(data, kind, enough=limit + SLACK_S) if kind is not None else None
    if length is None:
        raise ValidationError(
            _("This recording cannot be read: record it again, or send a WAV, Ogg, WebM or MP4 file."),
            code="unsupported_type",
        )
    if length > limit + SLACK_S:
        raise ValidationError(
            _("A recording may be at most %(seconds)d seconds long.") % {"seconds": limit}, code="voice_too_long"
        )
    endpoint = endpoints.speech(scope.user, user_settings=scope.user_settings).endpoint
    if endpoint is None:
        raise NotConfigured()
    quotas.take_transcription(scope.user_id)
    try:
        transcript = speech.transcribe(
            endpoint,
            data,
            f"voice.{kind}",
            user=scope.user,
            seconds=length,
            attribution={"conversation": str(conversation.pk)},
        )
    except AIError as error:
        if error.code == "budget_exceeded":
            raise caps.explained(BudgetExceeded(limit=error.limit), scope.user) from None
        raise SpeechFailed(message=notices.text(notices.MODEL_FAILED, error.params())) from None
    return transcript.text


def available(user: Any, user_settings: Any = UNREAD) -> bool:
    """Whether ``user`` has a speech endpoint now: the page offers its microphone only then."""
    return endpoints.speech(user, user_settings=user_settings).endpoint is not None


def _read(audio: Any) -> bytes:
    """The recording's bytes, its size checked before they are read where the file says it."""
    limit = agent_settings.MAX_VOICE_BYTES
    if isinstance(audio, (bytes, bytearray)):
        data = bytes(audio)
    else:
        if (getattr(audio, "size", None) or 0) > limit:
            raise too_large()
        data = audio.read(limit + 1)
    if len(data) > limit:
        raise too_large()
    if not data:
        raise ValidationError(_("The recording is empty."), code="voice_empty")
    return data


def too_large() -> ValidationError:
    """A recording over ``MAX_VOICE_BYTES``, refused."""
    limit = agent_settings.MAX_VOICE_BYTES
    return ValidationError(
        _("A recording may be at most %(megabytes)d MB.") % {"megabytes": limit // (1024 * 1024)},
        code="voice_too_large",
    )
