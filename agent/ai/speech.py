"""``transcribe()``: speech to text through an endpoint's ``/audio/transcriptions``, one journal row per call.

Like a model call: the official ``openai`` client, the endpoint's adapter for the request and its
errors, the cost caps checked first, and a journal row (``source="transcription"``) written before
this returns or raises, its cost the speech's minutes at the endpoint's price. The audio is sent
and never kept.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

from ..models import AIRequest, Endpoint
from . import guard, usage
from .client import client_for, journal_failure
from .providers import AIError, adapter_for

SOURCE = "transcription"
TASK = "agent.transcribe"
GUESSED_BYTES_PER_SECOND = 4_000
"""A recording whose length nothing tells is taken as speech at 32 kbit/s (what browsers record at)."""


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
    seconds: float | None = None,
    attribution: dict[str, Any] | None = None,
) -> Transcript:
    """The words of ``audio`` (a file called ``name``: its extension tells the server its format).

    ``seconds``: the speech's length as the caller knows it (measured from the file, or what the
    recorder said); the server's own figure wins when it gives one.
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
    limit = guard.limit_reached(user)
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
    length = adapter.transcribed_seconds(result) or seconds or measured_seconds(audio)
    whole = max(1, round(length or len(audio) / GUESSED_BYTES_PER_SECOND))
    row = AIRequest.objects.create(
        **journal,
        status=AIRequest.Status.SUCCESS,
        audio_seconds=whole,
        cost_usd=adapter.audio_price(whole),
        latency_ms=int((time.monotonic() - started) * 1000),
    )
    usage.deliver(row)
    return Transcript(text=text, seconds=whole, request_id=row.pk)


def measured_seconds(audio: bytes) -> float | None:
    """The length of a WAV or an Ogg (Opus, as Telegram's voice notes) recording from its own headers;
    None for a format that does not say it up front (the browser's WebM)."""
    if audio[:4] == b"RIFF" and audio[8:12] == b"WAVE":
        return _wav_seconds(audio)
    if audio[:4] == b"OggS":
        return _ogg_seconds(audio)
    return None


def _wav_seconds(audio: bytes) -> float | None:
    position, rate_bytes, data_bytes = 12, 0, 0
    while position + 8 <= len(audio):
        chunk, size = audio[position : position + 4], struct.unpack("<I", audio[position + 4 : position + 8])[0]
        if chunk == b"fmt " and position + 20 <= len(audio):
            rate_bytes = struct.unpack("<I", audio[position + 16 : position + 20])[0]
        elif chunk == b"data":
            data_bytes = min(size, len(audio) - position - 8)
            break
        position += 8 + size + (size & 1)
    return data_bytes / rate_bytes if rate_bytes else None


def _ogg_seconds(audio: bytes) -> float | None:
    """The last page's granule position over the stream's rate (Opus always counts at 48 kHz)."""
    last = audio.rfind(b"OggS")
    if last < 0 or last + 14 > len(audio):
        return None
    granule = struct.unpack("<q", audio[last + 6 : last + 14])[0]
    if b"OpusHead" in audio[:200]:
        rate = 48_000
    else:
        vorbis = audio.find(b"\x01vorbis")
        if vorbis < 0 or vorbis + 16 > len(audio):
            return None
        rate = struct.unpack("<I", audio[vorbis + 12 : vorbis + 16])[0]
    return granule / rate if granule > 0 and rate else None
