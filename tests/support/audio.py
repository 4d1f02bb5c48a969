"""Recordings for the voice tests, made here: a WAV of silence of a given length (its header says how long)."""

from __future__ import annotations

import io
import wave

RATE = 16_000


def wav(seconds: float) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(RATE)
        writer.writeframes(b"\0\0" * int(RATE * seconds))
    return out.getvalue()
