"""The demo's offline ears: a real recognizer (PocketSphinx) hears the demo's requests spoken, from a
WAV as a browser's fake microphone plays it and from Telegram's Ogg/Opus voice note, served as OpenAI's
``/audio/transcriptions`` to the real client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import pytest

from agent import voice
from agent.models import AgentSettings, AIRequest
from agent_project.demo import hearing, offline
from tests.support.factories import EndpointFactory

SPEECH = Path(__file__).resolve().parent / "fixtures" / "speech"


@pytest.mark.parametrize("name", ["create-a-note-buy-milk.wav", "create-a-note-buy-milk.oga"])
def test_the_recognizer_hears_a_spoken_request(name: str) -> None:
    text, seconds = hearing.words((SPEECH / name).read_bytes())
    assert text == "create a note buy milk"
    assert 2 < seconds < 5


def test_a_recording_that_is_not_audio_is_refused_not_guessed() -> None:
    with pytest.raises(av.FFmpegError):
        hearing.words(b"not audio at all")


@pytest.mark.django_db
def test_the_offline_model_transcribes_for_the_assistant(ref: Any, chat: Any) -> None:
    endpoint = EndpointFactory(
        name="offline", base_url=offline.serve(), model=offline.MODEL_NAME, supports_transcription=True, timeout_s=20
    )
    AgentSettings.objects.update(speech_endpoint=endpoint)
    audio = (SPEECH / "create-a-note-buy-milk.oga").read_bytes()
    assert voice.transcribe(ref, chat.pk, audio, impersonated=False) == "create a note buy milk"
    assert AIRequest.objects.get().audio_seconds in (3, 4)
