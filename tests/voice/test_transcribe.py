"""Voice to text: the speech endpoint in effect, reached through the real ``openai`` client against the
scripted server; the recording's limits, the journal and its price, and every refusal."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.urls import reverse

from agent import voice
from agent.access import SessionRef
from agent.core.errors import BudgetExceeded, NotConfigured, NotFound, SessionGone, SpeechFailed
from agent.models import AgentSettings, AIRequest, Endpoint
from agent.web.views import page_config
from tests.support.audio import encoded, wav
from tests.support.factories import AIRequestFactory, EndpointFactory, UserSettingsFactory
from tests.support.model_server import error, transcript
from tests.support.sessions import csrf_client


def test_a_recording_becomes_the_words_the_endpoint_heard(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any
) -> None:
    model_server.transcripts.append(transcript(" Create a note: buy milk ", seconds=30))
    recording = encoded(2.5)
    audio = ContentFile(recording, name="rec.webm")

    assert voice.transcribe(ref, chat.pk, audio, impersonated=False) == "Create a note: buy milk"

    (received,) = model_server.recordings
    assert (received["name"], received["audio"], received["model"]) == ("voice.webm", recording, "whisper-1")
    row = AIRequest.objects.get()
    assert (row.source, row.status, row.audio_seconds, row.user_id) == ("transcription", "success", 30, chat.user_id)
    assert row.cost_usd == Decimal("0.003")  # half a minute at 0.006 a minute: the server's count wins


def test_the_length_comes_from_the_file_when_the_server_does_not_count_it(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any
) -> None:
    model_server.transcripts.append(transcript("hello"))
    voice.transcribe(ref, chat.pk, wav(90), impersonated=False)
    assert AIRequest.objects.get().audio_seconds == 90
    assert AIRequest.objects.get().cost_usd == Decimal("0.009")


def test_a_recording_over_the_longest_is_refused_before_it_is_sent(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_VOICE_S": 60}
    with pytest.raises(ValidationError) as refused:
        voice.transcribe(ref, chat.pk, wav(61.5), impersonated=False)
    assert refused.value.code == "voice_too_long"
    with pytest.raises(ValidationError) as webm:
        voice.transcribe(ref, chat.pk, encoded(62), impersonated=False)
    assert webm.value.code == "voice_too_long"
    assert model_server.recordings == [] and not AIRequest.objects.exists()


def test_a_recording_over_the_largest_or_empty_is_refused(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_VOICE_BYTES": 1000}
    with pytest.raises(ValidationError) as large:
        voice.transcribe(ref, chat.pk, ContentFile(b"x" * 1001, name="a.webm"), impersonated=False)
    with pytest.raises(ValidationError) as empty:
        voice.transcribe(ref, chat.pk, b"", impersonated=False)
    assert (large.value.code, empty.value.code) == ("voice_too_large", "voice_empty")
    assert model_server.recordings == []


def test_without_a_speech_endpoint_nothing_is_offered_or_sent(ref: SessionRef, chat: Any, endpoint: Endpoint) -> None:
    with pytest.raises(NotConfigured):
        voice.transcribe(ref, chat.pk, wav(1), impersonated=False)
    assert not voice.available(chat.user)
    assert page_config("", voice_offered=voice.available(chat.user))["voice"] is False


def test_an_endpoint_that_cannot_transcribe_is_never_the_speech_endpoint(
    ref: SessionRef, chat: Any, speech: Endpoint
) -> None:
    Endpoint.objects.filter(pk=speech.pk).update(supports_transcription=False)
    assert not voice.available(chat.user)
    with pytest.raises(NotConfigured):
        voice.transcribe(ref, chat.pk, wav(1), impersonated=False)


def test_the_users_own_speech_endpoint_answers_and_one_that_cannot_falls_back(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any
) -> None:
    own = EndpointFactory(name="own", base_url=model_server.base_url, model="own-whisper", supports_transcription=True)
    UserSettingsFactory(user=chat.user, speech_endpoint=own, speech_endpoint_set_by="staff")
    model_server.transcripts.extend([transcript("mine"), transcript("site's")])
    assert voice.transcribe(ref, chat.pk, wav(1), impersonated=False) == "mine"
    Endpoint.objects.filter(pk=own.pk).update(supports_transcription=False)
    assert voice.transcribe(ref, chat.pk, wav(1), impersonated=False) == "site's"
    assert [r["model"] for r in model_server.recordings] == ["own-whisper", "whisper-1"]


def test_a_failing_speech_endpoint_says_what_a_failed_model_call_says(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any
) -> None:
    model_server.transcripts.append(error(429))
    with pytest.raises(SpeechFailed) as failed:
        voice.transcribe(ref, chat.pk, wav(1), impersonated=False)
    assert failed.value.code == "model_failed"
    assert failed.value.message == "The model is busy (rate limited). Try again in a moment."
    row = AIRequest.objects.get()
    assert (row.source, row.status, row.error_code) == ("transcription", "error", "rate_limited")


def test_the_cost_caps_stop_a_transcription_before_it_is_sent(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "DAILY_COST_PER_USER": 0.01}
    AIRequestFactory(user=chat.user, cost_usd=1)
    with pytest.raises(BudgetExceeded):
        voice.transcribe(ref, chat.pk, wav(1), impersonated=False)
    assert model_server.recordings == []
    assert AIRequest.objects.filter(source="transcription", status="refused").count() == 1


def test_transcriptions_count_against_the_cost_caps(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any, settings: Any
) -> None:
    settings.AGENT = {**settings.AGENT, "DAILY_COST_PER_USER": 0.005}
    model_server.transcripts.append(transcript("long", seconds=60))  # 0.006: over the cap once journalled
    voice.transcribe(ref, chat.pk, wav(1), impersonated=False)
    with pytest.raises(BudgetExceeded):
        voice.transcribe(ref, chat.pk, wav(1), impersonated=False)


def test_another_users_chat_or_an_ended_session_is_refused(
    ref: SessionRef, chat: Any, speech: Endpoint, model_server: Any, make_user: Any
) -> None:
    from tests.support.sessions import login

    _client, other = login(make_user())
    with pytest.raises(NotFound):
        voice.transcribe(other, chat.pk, wav(1), impersonated=False)
    with pytest.raises(NotFound):
        voice.transcribe(ref, uuid.uuid4(), wav(1), impersonated=False)
    with pytest.raises(SessionGone):
        voice.transcribe(SessionRef("gone", chat.user_id), chat.pk, wav(1), impersonated=False)
    assert model_server.recordings == []


def test_the_page_posts_a_recording_and_gets_the_words(
    user: Any, chat: Any, speech: Endpoint, model_server: Any
) -> None:
    client, token = csrf_client(user)
    model_server.transcripts.append(transcript("find notes about milk"))
    url = reverse("agent:transcribe", args=[chat.pk])
    audio = ContentFile(encoded(2), name="voice.webm")

    refused = client.post(url, {"audio": audio})
    assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"
    audio.seek(0)
    answered = client.post(url, {"audio": audio}, HTTP_X_CSRFTOKEN=token)
    assert answered.status_code == 200 and answered.json() == {"text": "find notes about milk"}
    missing = client.post(url, {}, HTTP_X_CSRFTOKEN=token)
    assert missing.status_code == 400 and "audio" in missing.json()["fields"]


def test_the_page_offers_the_microphone_only_with_a_speech_endpoint(user: Any, speech: Endpoint) -> None:
    client, _token = csrf_client(user)
    page = client.get(reverse("agent:chat")).content.decode()
    assert '"voice": true' in page and 'id="record"' in page
    AgentSettings.objects.update(speech_endpoint=None)
    assert '"voice": false' in client.get(reverse("agent:chat")).content.decode()
