"""Voice: a user's recording turned into text, for them to read before it is sent (or, from
Telegram, sent as their message, marked as spoken).

``transcribe`` is a door like the chats' own: the actor's checks and the chat's, the recording's
limits, then the speech endpoint in effect for the user (``agent.ai.endpoints.speech``). The
recording goes to the endpoint and is never kept.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from . import notices
from .access import Actor
from .ai import AIError, endpoints, limits, speech
from .conf import agent_settings
from .conversations import authorize_conversation
from .errors import BudgetExceeded, NotConfigured, SpeechFailed

SLACK_S = 1.0
"""A recorder stopped at the limit may report a moment more."""


def transcribe(
    ref: Actor, conversation_id: Any, audio: Any, *, impersonated: bool, seconds: float | None = None
) -> str:
    """The words of ``audio`` (bytes, or a file with a name such as ``rec.webm``) recorded for this chat.

    ``seconds``: the recording's length as the recorder counted it, when its file does not say.
    Over ``MAX_VOICE_BYTES`` or ``MAX_VOICE_S``, or empty: ``ValidationError``; no speech endpoint:
    ``NotConfigured``; the caps reached: ``BudgetExceeded``; the endpoint failing: ``SpeechFailed``
    with the sentence a failed model call's notice gives.
    """
    scope, conversation = authorize_conversation(ref, conversation_id, impersonated=impersonated)
    data, name = _read(audio)
    length = speech.measured_seconds(data) or seconds
    if length is not None and length > agent_settings.MAX_VOICE_S + SLACK_S:
        limit = agent_settings.MAX_VOICE_S
        raise ValidationError(
            _("A recording may be at most %(seconds)d seconds long.") % {"seconds": limit}, code="voice_too_long"
        )
    endpoint = endpoints.speech(scope.user, user_settings=scope.user_settings).endpoint
    if endpoint is None:
        raise NotConfigured()
    try:
        transcript = speech.transcribe(
            endpoint,
            data,
            name,
            user=scope.user,
            seconds=length,
            attribution={"conversation": str(conversation.pk)},
        )
    except AIError as error:
        if error.code == "budget_exceeded":
            raise limits.explained(BudgetExceeded(limit=error.limit), scope.user) from None
        raise SpeechFailed(message=notices.text(notices.MODEL_FAILED, error.params())) from None
    return transcript.text


def available(user: Any, user_settings: Any = None) -> bool:
    """Whether ``user`` has a speech endpoint now: the page offers its microphone only then."""
    return endpoints.speech(user, user_settings=user_settings).endpoint is not None


def _read(audio: Any) -> tuple[bytes, str]:
    """The recording's bytes and a file name whose extension names its format; a size check first."""
    limit = agent_settings.MAX_VOICE_BYTES
    if isinstance(audio, (bytes, bytearray)):
        data, name = bytes(audio), "voice.ogg"
    else:
        if (getattr(audio, "size", None) or 0) > limit:
            raise too_large()
        data, name = audio.read(limit + 1), os.path.basename(getattr(audio, "name", "") or "voice.webm")
    if len(data) > limit:
        raise too_large()
    if not data:
        raise ValidationError(_("The recording is empty."), code="voice_empty")
    return data, name or "voice.webm"


def too_large() -> ValidationError:
    """A recording over ``MAX_VOICE_BYTES``, refused."""
    limit = agent_settings.MAX_VOICE_BYTES
    return ValidationError(
        _("A recording may be at most %(megabytes)d MB.") % {"megabytes": limit // (1024 * 1024)},
        code="voice_too_large",
    )
