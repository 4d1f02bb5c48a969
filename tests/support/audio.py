"""Recordings for the voice tests, made here: a WAV of silence of a given length (its header says how long),
and the same silence in the containers browsers and phones record (WebM, Ogg, MP4), encoded by PyAV."""

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


def encoded(seconds: float, container: str = "webm", codec: str = "libopus", **options: str) -> bytes:
    """``seconds`` of silence encoded by PyAV (FFmpeg) as a real recorder would: WebM/Opus by default."""
    import av

    out = io.BytesIO()
    with av.open(out, "w", format=container, options=options) as media:
        stream = media.add_stream(codec, rate=48_000)
        stream.layout = "mono"
        size = stream.codec_context.frame_size or 960
        for start in range(0, int(48_000 * seconds), size):
            frame = av.AudioFrame(format=stream.codec_context.format.name, layout="mono", samples=size)
            for plane in frame.planes:
                plane.update(bytes(plane.buffer_size))
            frame.sample_rate, frame.pts = 48_000, start
            for packet in stream.encode(frame):
                media.mux(packet)
        for packet in stream.encode(None):
            media.mux(packet)
    return out.getvalue()
