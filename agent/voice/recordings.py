"""What a recording is and how long it lasts, read from its own bytes, never from its name or a client's word.

``audio_format`` sniffs the container from the first bytes (WAV, Ogg, WebM/Matroska, MP4, FLAC,
MP3). ``seconds`` measures it: by decoding with PyAV where it is installed (the ``voice`` extra),
which counts the samples the speech host will hear; else from the container's own headers
(WAV, Ogg, WebM/Matroska, MP4, FLAC; MP3 says nothing up front, so it needs PyAV). A compressed
container read without decoding counts at least its size at the highest bit rate its codecs
reach, so timestamps that lie cannot make a long recording short. None: the length cannot be read.
"""

from __future__ import annotations

import io
import struct
from typing import Callable

WAV, OGG, WEBM, MP4, FLAC, MP3 = "wav", "ogg", "webm", "mp4", "flac", "mp3"
"""Formats by the extension the speech host reads them by."""

COMPRESSED_BYTES_PER_S = 64_000
"""512 kbit/s, above the most Opus, Vorbis or AAC spend on a second: what a compressed second may take at most."""


def audio_format(data: bytes) -> str | None:
    """The recording's container by its signature; None for anything that is not one of them."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return WAV
    if data[:4] == b"OggS":
        return OGG
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return WEBM
    if data[4:8] == b"ftyp":
        return MP4
    if data[:4] == b"fLaC":
        return FLAC
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return MP3
    return None


def seconds(data: bytes, kind: str, *, enough: float) -> float | None:
    """How long the recording of ``kind`` lasts; decoding stops once past ``enough`` seconds."""
    decoded = _decoded_seconds(data, enough)
    if decoded is not _NO_DECODER:
        return decoded
    return container_seconds(data, kind)


def container_seconds(data: bytes, kind: str) -> float | None:
    """The length the container's headers give, at least its size at ``COMPRESSED_BYTES_PER_S`` when compressed."""
    reader = _READERS.get(kind)
    length = reader(data) if reader is not None else None
    if length is None or kind in (WAV, FLAC):  # uncompressed or lossless: the header's count is the samples'
        return length
    return max(length, len(data) / COMPRESSED_BYTES_PER_S)


_NO_DECODER = -1.0


def _decoded_seconds(data: bytes, enough: float) -> float | None:
    """The audio's length as PyAV decodes it; ``_NO_DECODER`` without PyAV."""
    try:
        import av
    except ImportError:
        return _NO_DECODER
    total = 0.0
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                return None
            for frame in container.decode(container.streams.audio[0]):
                total += frame.samples / (frame.sample_rate or 1)
                if total > enough:
                    break
    except Exception:  # noqa: BLE001  any file the decoder cannot read is a recording whose length is unknown
        return None
    return total or None


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


_SEGMENT, _INFO, _CLUSTER, _BLOCK_GROUP = 0x18538067, 0x1549A966, 0x1F43B675, 0xA0
_TIMECODE_SCALE, _DURATION, _CLUSTER_TIMECODE, _SIMPLE_BLOCK, _BLOCK = 0x2AD7B1, 0x4489, 0xE7, 0xA3, 0xA1


def _matroska_seconds(data: bytes) -> float | None:
    """The later of the segment's stated duration and its last block's time (a browser's live
    recording states none). Elements are walked flat: the ones that hold the timing are entered,
    every other is stepped over by its size."""
    position, scale, duration, cluster, last = 0, 1_000_000, 0.0, 0, None
    while position < len(data):
        element, position = _vint(data, position, keep_marker=True)
        size, position = _vint(data, position, keep_marker=False)
        if element is None or position > len(data):
            break
        if element in (_SEGMENT, _INFO, _CLUSTER, _BLOCK_GROUP):
            continue  # entered: its children follow (a live recording's sizes are unknown)
        end = len(data) if size is None else position + size
        body = data[position:end]
        if element == _TIMECODE_SCALE and body:
            scale = int.from_bytes(body, "big")
        elif element == _DURATION and len(body) in (4, 8):
            duration = struct.unpack(">f" if len(body) == 4 else ">d", body)[0]
        elif element == _CLUSTER_TIMECODE and body:
            cluster = int.from_bytes(body, "big")
        elif element in (_SIMPLE_BLOCK, _BLOCK):
            _track, offset = _vint(body, 0, keep_marker=False)
            if offset + 2 <= len(body):
                last = max(last or 0, cluster + struct.unpack(">h", body[offset : offset + 2])[0])
        position = end
    ticks = max(duration, float(last or 0))
    return ticks * scale / 1e9 if ticks > 0 else None


def _vint(data: bytes, position: int, *, keep_marker: bool) -> tuple[int | None, int]:
    """An EBML variable-length integer at ``position`` and where the next one starts; None for an
    unknown size (all its bits set) or a malformed one."""
    if position >= len(data) or data[position] == 0:
        return None, len(data) + 1
    length = 9 - data[position].bit_length()
    raw = data[position : position + length]
    value = int.from_bytes(raw, "big")
    if keep_marker:
        return value, position + length
    value &= (1 << (7 * length)) - 1
    return (None if value == (1 << (7 * length)) - 1 else value), position + length


def _mp4_seconds(data: bytes) -> float | None:
    """The movie header's duration over its time scale (``moov``/``mvhd``)."""
    position, end = 0, len(data)
    while position + 8 <= end:
        size, box = struct.unpack(">I", data[position : position + 4])[0], data[position + 4 : position + 8]
        header = 8
        if size == 1 and position + 16 <= end:
            size, header = struct.unpack(">Q", data[position + 8 : position + 16])[0], 16
        elif size == 0:
            size = end - position
        if size < header:
            return None
        if box == b"moov":
            position, end = position + header, min(end, position + size)
            continue
        if box == b"mvhd":
            body = data[position + header : position + size]
            version = body[0] if body else 0
            fields = ">II" if version == 0 else ">IQ"
            start = 12 if version == 0 else 20
            if len(body) < start + struct.calcsize(fields):
                return None
            scale, duration = struct.unpack(fields, body[start : start + struct.calcsize(fields)])
            return duration / scale if scale and duration else None
        position += size
    return None


def _flac_seconds(data: bytes) -> float | None:
    """STREAMINFO's total samples over its sample rate."""
    info = data[8:42]
    if len(info) < 18 or data[4] & 0x7F != 0:
        return None
    rate = int.from_bytes(info[10:13], "big") >> 4
    samples = ((info[13] & 0x0F) << 32) | int.from_bytes(info[14:18], "big")
    return samples / rate if rate and samples else None


_READERS: dict[str, Callable[[bytes], float | None]] = {
    WAV: _wav_seconds,
    OGG: _ogg_seconds,
    WEBM: _matroska_seconds,
    MP4: _mp4_seconds,
    FLAC: _flac_seconds,
}
