"""Voice notes and files sent in Telegram: a voice note is transcribed and sent as the user's message,
marked as spoken (its words shown back first); a document becomes a file of the chat that the turn reads."""

from __future__ import annotations

from typing import Any

import pytest

from agent.access import SessionRef
from agent.models import AIRequest, Attachment, Endpoint, Message, TelegramLink, Turn
from agent.telegram import updates
from tests.support.audio import encoded, wav
from tests.support.model_server import ScriptedModelServer, answer, transcript
from tests.support.telegram import connect
from tests.support.telegram_api import FakeBotApi
from tests.support.turns import wait_ended
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
CHAT = 8001


@pytest.fixture
def linked(worker: Any, bot_api: FakeBotApi, ref: SessionRef, endpoint: Endpoint) -> TelegramLink:
    link = connect(bot_api, ref, CHAT, inline=False)
    wait_until(lambda: bot_api.texts(CHAT), what="the welcome")
    return link


def test_a_voice_note_is_transcribed_and_sent_as_the_users_spoken_message(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer, speech: Endpoint
) -> None:
    model_server.transcripts.append(transcript("Create a note: buy milk"))
    model_server.push(answer("I can do that."))
    note = encoded(3, "ogg")
    updates.record(bot_api.sends_voice(CHAT, note, duration=1))  # the length is the recording's, not the claim
    turn = wait_ended(wait_until(lambda: Turn.objects.first(), what="a turn"))
    assert (turn.text, turn.spoken) == ("Create a note: buy milk", True)
    said = Message.objects.get(role="user")
    assert (said.content, said.spoken) == ("Create a note: buy milk", True)
    wait_until(lambda: "I can do that." in bot_api.texts(CHAT), what="the answer")
    assert "🎤 Create a note: buy milk" in bot_api.texts(CHAT)
    (recording,) = model_server.recordings
    assert recording["audio"] == note and recording["name"] == "voice.ogg"
    assert AIRequest.objects.get(source="transcription").audio_seconds == 3


def test_a_voice_note_without_a_speech_endpoint_is_answered_politely(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    updates.record(bot_api.sends_voice(CHAT, wav(1), duration=1))
    wait_until(lambda: len(bot_api.texts(CHAT)) == 2, what="the answer")
    assert "No model is configured" in bot_api.texts(CHAT)[-1]
    assert not Turn.objects.exists() and model_server.recordings == []


def test_a_document_with_a_caption_is_read_by_the_turn(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("It says to buy milk."))
    updates.record(bot_api.sends_document(CHAT, b"Buy milk and bread", "list.txt", caption="what does it say?"))
    turn = wait_ended(wait_until(lambda: Turn.objects.first(), what="a turn"))
    file = Attachment.objects.get()
    assert (file.name, file.status, str(file.pk) in turn.attachment_ids) == ("list.txt", "ready", True)
    assert "Buy milk and bread" in model_server.requests[0]["messages"][-1]["content"]


def test_a_document_alone_waits_for_the_next_message(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    updates.record(bot_api.sends_document(CHAT, b"Buy milk", "list.txt"))
    wait_until(lambda: any("What should I do with it" in t for t in bot_api.texts(CHAT)), what="the question")
    assert not Turn.objects.exists()
    model_server.push(answer("Done reading."))
    updates.record(bot_api.says(CHAT, "summarise it"))
    turn = wait_ended(wait_until(lambda: Turn.objects.first(), what="a turn"))
    assert turn.attachment_ids == [str(Attachment.objects.get().pk)]


def test_a_file_of_a_kind_the_site_refuses_is_answered_with_why(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    updates.record(bot_api.sends_document(CHAT, b"MZ\x90\x00binary", "tool.exe", caption="run it"))
    wait_until(lambda: any("cannot be attached" in t for t in bot_api.texts(CHAT)), what="the refusal")
    assert not Attachment.objects.exists() and not Turn.objects.exists()
