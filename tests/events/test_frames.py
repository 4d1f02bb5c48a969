"""The websocket's action frames go through the same doors as HTTP: send, stop, confirm, cancel (SPEC §10)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from agent.access import SessionRef, authorize_session
from agent.models import Confirmation, Conversation, Turn
from agent.tools import execute_as
from tests.events.sockets import opened, subscribed
from tests.notes.models import Note

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]


async def reply_to(ws: Any, frame: dict[str, Any], kind: str) -> dict[str, Any]:
    """Send ``frame`` and read frames until the one of type ``kind`` (events may come first)."""
    await ws.send_json_to({**frame, "ref": "r1"})
    for _ in range(10):
        reply = await ws.receive_json_from(timeout=5)
        if reply["type"] == kind:
            return reply
    raise AssertionError(f"no {kind} reply")


@sync_to_async
def card_for(ref: SessionRef, chat: Conversation, title: str) -> Confirmation:
    result = execute_as(
        authorize_session(ref, impersonated=False),
        "notes_create",
        {"title": title},
        via="agent",
        chat=chat,
        call_id="c1",
    )
    return result.confirmation


async def test_send_starts_a_turn_and_its_status_reaches_the_subscribed_socket(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any
) -> None:
    ws = await opened(session[0])
    await subscribed(ws, chat)
    accepted = await reply_to(ws, {"type": "send", "conversation": str(chat.pk), "text": "hello"}, "accepted")
    turn = await Turn.objects.aget(pk=accepted["turn"])
    assert (turn.text, turn.status, accepted["conversation"]) == ("hello", "queued", str(chat.pk))
    status = await ws.receive_json_from(timeout=5)
    assert status == {"type": "turn", "conversation": str(chat.pk), "turn": str(turn.pk), "status": "queued"}
    await ws.disconnect()


async def test_a_refused_send_answers_its_code_and_starts_nothing(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any
) -> None:
    ws = await opened(session[0])
    reply = await reply_to(ws, {"type": "send", "conversation": str(chat.pk), "text": "   "}, "error")
    assert reply["error"] == "invalid" and "content" in str(reply["fields"])
    assert not await Turn.objects.aexists()
    await ws.disconnect()


async def test_stop_asks_the_chats_live_turn_to_stop(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any
) -> None:
    ws = await opened(session[0])
    accepted = await reply_to(ws, {"type": "send", "conversation": str(chat.pk), "text": "hello"}, "accepted")
    stopping = await reply_to(ws, {"type": "stop", "conversation": str(chat.pk)}, "stopping")
    assert stopping["asked"] is True
    assert (await Turn.objects.aget(pk=accepted["turn"])).stop_requested_at is not None
    await ws.disconnect()


async def test_confirm_runs_the_cards_write_once(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    card = await card_for(session[1], chat, "Buy milk")
    ws = await opened(session[0])
    decided = await reply_to(ws, {"type": "confirm", "confirmation": str(card.pk)}, "decided")
    assert (decided["confirmation"], decided["status"]) == (str(card.pk), "done")
    again = await reply_to(ws, {"type": "confirm", "confirmation": str(card.pk)}, "error")
    assert again["error"] == "not_waiting"
    assert await Note.objects.filter(title="Buy milk").acount() == 1
    await ws.disconnect()


async def test_cancel_drops_the_cards_write(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    card = await card_for(session[1], chat, "Buy milk")
    ws = await opened(session[0])
    decided = await reply_to(ws, {"type": "cancel", "confirmation": str(card.pk)}, "decided")
    assert decided["status"] == "cancelled"
    assert not await Note.objects.aexists()
    await ws.disconnect()


async def test_send_with_a_file_that_is_not_this_chats_answers_not_found(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any
) -> None:
    ws = await opened(session[0])
    frame = {"type": "send", "conversation": str(chat.pk), "text": "read it", "attachment_ids": [str(chat.pk)]}
    reply = await reply_to(ws, frame, "error")
    assert reply["error"] == "not_found"
    assert not await Turn.objects.aexists()
    await ws.disconnect()
