"""A recording from the page's microphone, answered with its words for the composer (never sent unseen)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .. import voice
from ..access import SessionRef
from ..core.conf import agent_settings
from .http import SizeCap, api, invalid_response, page_language


@csrf_exempt  # the upload handlers must be set before the CSRF check reads the body; _transcribe checks it
@require_POST
def transcribe(request: HttpRequest, conversation_id: str) -> HttpResponseBase:
    """``audio`` (the recording) → ``{"text"}``; its length is read from the recording itself."""
    cap = SizeCap.install(request, agent_settings.MAX_VOICE_BYTES)
    if cap is None:
        with translation.override(page_language(request)):
            return invalid_response(voice.too_large())
    return _transcribe(request, conversation_id, cap)


@api  # checks the CSRF token after the upload handlers are in place
def _transcribe(
    request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str, cap: SizeCap
) -> dict[str, Any]:
    audio = request.FILES.get("audio")
    if cap.too_large:
        raise voice.too_large()
    if audio is None:
        raise ValidationError({"audio": ValidationError(_("No recording was sent."), code="required")})
    try:
        text = voice.transcribe(actor, conversation_id, audio, impersonated=impersonated)
    finally:
        audio.close()
    return {"text": text}
