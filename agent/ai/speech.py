"""``transcribe()``: speech to text through an endpoint's ``/audio/transcriptions``, one journal row per call.

Like a model call: the official ``openai`` client, the endpoint's adapter for the request and its
errors, the cost caps checked first, and a journal row (``source="transcription"``) written before
this returns or raises, its cost the speech's minutes at the endpoint's price. The audio is sent
and never kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..limits import costs
from ..models import AIRequest, Endpoint
from . import usage
from .client import client_for, journal_failure
from .providers import AIError, adapter_for

SOURCE = "transcription"
TASK = "agent.transcribe"


@dataclass(frozen=True)
class Transcript:
    text: str
    seconds: int
    request_id: Any


def transcribe(
    endpoint: Endpoint | None,
    audio: bytes,
    name: str,
    *,
    user: Any,
    seconds: float,
    attribution: dict[str, Any] | None = None,
) -> Transcript:
    """The words of ``audio`` (a file called ``name``: its extension tells the server its format).

    ``seconds``: the speech's length as the caller measured it from the recording itself; the
    server's own figure wins when it gives one.
    """
    journal = {
        "endpoint": endpoint if endpoint is not None and endpoint.pk else None,
        "user": user,
        "source": SOURCE,
        "task": TASK,
        "attribution": attribution or {},
        "model": getattr(endpoint, "model", "") or "",
    }
    if endpoint is None or not endpoint.supports_transcription:
        raise journal_failure(journal, AIError("endpoint_not_configured"))
    if not endpoint.enabled:
        raise journal_failure(journal, AIError("endpoint_disabled"))
    limit = costs.limit_reached(user)
    if limit is not None:
        row = AIRequest.objects.create(**journal, status=AIRequest.Status.REFUSED, error_code="budget_exceeded")
        raise AIError("budget_exceeded", request_id=row.pk, limit=limit, refused=True)
    adapter = adapter_for(endpoint)
    started = time.monotonic()
    try:
        result = client_for(endpoint).audio.transcriptions.create(
            **adapter.transcription_request(audio, name), timeout=float(endpoint.timeout_s)
        )
        text = adapter.transcript(result)
    except AIError as error:
        raise journal_failure(journal, error, started) from None
    except Exception as error:  # every SDK error becomes a code; provider text is never kept
        raise journal_failure(journal, adapter.error(error), started) from None
    whole = max(1, round(adapter.transcribed_seconds(result) or seconds))
    row = AIRequest.objects.create(
        **journal,
        status=AIRequest.Status.SUCCESS,
        audio_seconds=whole,
        cost_usd=adapter.audio_price(whole),
        latency_ms=int((time.monotonic() - started) * 1000),
    )
    usage.deliver(row)
    return Transcript(text=text, seconds=whole, request_id=row.pk)
