"""A recording's length and kind come from its own bytes, never from what the client says: a long
WebM with a false ``seconds`` is refused, only audio reaches the speech host, audio whose length
cannot be read is refused ``unsupported_type``, and a user's transcriptions are capped per minute."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from agent.models import AIRequest, Endpoint
from agent.voice import recordings
from tests.support.audio import encoded, wav
from tests.support.model_server import transcript
from tests.support.sessions import csrf_client

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


@pytest.fixture
def post(user: Any, chat: Any) -> Any:
    """POST a recording to the page's transcription door, as the microphone button does."""
    client, token = csrf_client(user)
    url = reverse("agent:transcribe", args=[chat.pk])

    def send(data: bytes, name: str = "rec.webm", **fields: str) -> Any:
        return client.post(url, {"audio": ContentFile(data, name=name), **fields}, HTTP_X_CSRFTOKEN=token)

    return send


def test_a_long_webm_with_a_false_seconds_is_refused_and_never_sent(
    post: Any, speech: Endpoint, model_server: Any, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_VOICE_S": 5}
    model_server.transcripts.append(transcript("should never be asked"))

    response = post(encoded(8), seconds="0.5")

    assert (response.status_code, response.json()["error"]) == (400, "voice_too_long")
    assert model_server.recordings == [] and not AIRequest.objects.exists()


def test_the_journal_counts_the_recordings_own_length_not_the_clients(
    post: Any, speech: Endpoint, model_server: Any
) -> None:
    model_server.transcripts.append(transcript("hello"))  # the host says nothing of the length
    assert post(encoded(3), seconds="0.5").status_code == 200
    assert AIRequest.objects.get().audio_seconds == 3


@pytest.mark.parametrize(
    ("data", "name"),
    [(PNG, "rec.webm"), (b"%PDF-1.7\n" + b"x" * 100, "rec.ogg"), (b"just some words", "voice.wav")],
    ids=["picture", "pdf", "text"],
)
def test_a_file_that_is_not_audio_is_refused_and_never_sent(
    post: Any, speech: Endpoint, model_server: Any, data: bytes, name: str
) -> None:
    response = post(data, name)
    assert (response.status_code, response.json()["error"]) == (415, "unsupported_type")
    assert model_server.recordings == []


def test_audio_whose_length_cannot_be_read_is_refused(post: Any, speech: Endpoint, model_server: Any) -> None:
    broken = encoded(2)[:40]  # a WebM header and nothing after it
    response = post(broken)
    assert (response.status_code, response.json()["error"]) == (415, "unsupported_type")
    assert model_server.recordings == []


def test_the_host_gets_the_format_found_not_the_name_sent(post: Any, speech: Endpoint, model_server: Any) -> None:
    model_server.transcripts.append(transcript("hi"))
    assert post(wav(1), "rec.webm").status_code == 200
    assert model_server.recordings[0]["name"] == "voice.wav"


def test_transcriptions_past_the_per_minute_cap_are_refused_429(
    post: Any, speech: Endpoint, model_server: Any, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "TRANSCRIPTIONS_PER_MINUTE": 2}
    model_server.transcripts.extend([transcript("one"), transcript("two"), transcript("three")])
    assert [post(wav(1)).status_code for _ in range(2)] == [200, 200]

    refused = post(wav(1))

    assert refused.status_code == 429
    body = refused.json()
    assert (body["error"], body["limit"]["limit"], body["limit"]["cap"]) == (
        "too_many_transcriptions",
        "transcriptions_per_minute",
        2,
    )
    assert "2 recordings in the last minute" in body["message"]
    assert len(model_server.recordings) == 2


# -- the containers' own headers, where PyAV is not installed ------------------------------------


@pytest.mark.parametrize(
    ("kind", "recording"),
    [
        ("webm", lambda: encoded(3)),
        ("webm", lambda: encoded(3, live="1")),  # as a browser records it: no duration up front
        ("ogg", lambda: encoded(3, "ogg")),
        ("mp4", lambda: encoded(3, "mp4", "aac")),
        ("flac", lambda: encoded(3, "flac", "flac")),
        ("wav", lambda: wav(3)),
    ],
    ids=["webm", "webm-live", "ogg", "mp4", "flac", "wav"],
)
def test_each_container_says_its_length_without_decoding(kind: str, recording: Any) -> None:
    data = recording()
    assert recordings.audio_format(data) == kind
    assert recordings.container_seconds(data, kind) == pytest.approx(3, abs=0.15)
    assert recordings.seconds(data, kind, enough=60) == pytest.approx(3, abs=0.15)


def test_a_container_whose_timestamps_lie_counts_at_least_its_size() -> None:
    # given a 3-second WebM padded with a megabyte its timestamps say nothing of (an EBML Void element)
    padded = encoded(3) + b"\xec\x01\x00\x00\x00\x00\x10\x00\x00" + bytes(1024 * 1024)
    # then read without decoding it lasts at least its size at the highest compressed rate
    assert recordings.container_seconds(padded, "webm") >= 1024 * 1024 / recordings.COMPRESSED_BYTES_PER_S
    # and decoded it is the three seconds a speech host would hear
    assert recordings.seconds(padded, "webm", enough=60) == pytest.approx(3, abs=0.15)
