"""The offline demo's ears: speech to text on this machine, for the demo model's ``/audio/transcriptions``.

A real recognizer (CMU PocketSphinx, whose English model ships in its wheel), decoding the recording
with PyAV (the browser's WebM, Telegram's Ogg, a WAV), and listening for what the offline demo model
understands: "create a note ...", "find notes about ...", "rename my note about ... to ...". English
only. Both libraries are the demo's (``pip install -e ".[demo]"``), never the app's.
"""

from __future__ import annotations

import functools
import tempfile
import threading
from typing import Any

RATE = 16_000

ITEMS = (
    "milk | oat milk | bread | apples | eggs | coffee | tea | cheese | butter | mom | dad | the bank | the doctor"
    " | a book | the rent | ideas | shopping | groceries | flowers | tickets"
)
GRAMMAR = f"""#JSGF V1.0;
grammar demo;
public <request> = <create> | <find> | <rename>;
<create> = (create | add | make | write) a note [<thing>];
<find> = (find | search | show) [my] notes about <item>;
<rename> = rename my note about <item> to <item>;
<thing> = [<verb>] <item>;
<verb> = buy | call | read | write | bring | pay | book;
<item> = {ITEMS};
"""


def available() -> bool:
    """Whether this machine can listen: the demo's extras are installed."""
    try:
        import av  # noqa: F401
        import pocketsphinx  # noqa: F401
    except ImportError:
        return False
    return True


def words(audio: bytes) -> tuple[str, float]:
    """What was said in ``audio`` (any format PyAV reads), and how many seconds it lasted."""
    pcm = _pcm(audio)
    seconds = len(pcm) / 2 / RATE
    with _listening:  # one recognizer of each kind, one recording at a time
        for decoder in (_decoder(grammar=True), _decoder(grammar=False)):  # the demo's phrases, else any English
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
            found = decoder.hyp()
            if found is not None and found.hypstr:
                return found.hypstr, seconds
    return "", seconds


_listening = threading.Lock()


def _pcm(audio: bytes) -> bytes:
    """The recording as 16 kHz mono 16-bit samples, with a moment of silence after it."""
    import io

    import av

    out = bytearray()
    with av.open(io.BytesIO(audio)) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
        for frame in container.decode(audio=0):
            for piece in resampler.resample(frame):
                out += bytes(piece.planes[0])[: piece.samples * 2]
        for piece in resampler.resample(None):
            out += bytes(piece.planes[0])[: piece.samples * 2]
    return bytes(out) + b"\0\0" * (RATE // 4)


@functools.lru_cache(maxsize=2)
def _decoder(*, grammar: bool) -> Any:
    from pocketsphinx import Decoder

    if not grammar:
        return Decoder(samprate=RATE, logfn="/dev/null")
    with tempfile.NamedTemporaryFile("w", suffix=".gram", delete=False) as file:
        file.write(GRAMMAR)
    return Decoder(samprate=RATE, jsgf=file.name, logfn="/dev/null")
