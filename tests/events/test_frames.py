"""The websocket's action frames go through the same doors as HTTP: send, stop, confirm, cancel."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from agent.access import SessionRef, authorize_session
from agent.models import Confirmation, Conversation, Turn
from agent.tools import execute_as
from tests.notes.models import Note
from tests.support.sockets import opened, subscribed

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
def confirmation_for(ref: SessionRef, chat: Conversation, title: str) -> Confirmation:
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
    confirmation = await confirmation_for(session[1], chat, "Buy milk")
    ws = await opened(session[0])
    decided = await reply_to(ws, {"type": "confirm", "confirmation": str(confirmation.pk)}, "decided")
    assert (decided["confirmation"], decided["status"]) == (str(confirmation.pk), "done")
    again = await reply_to(ws, {"type": "confirm", "confirmation": str(confirmation.pk)}, "error")
    assert again["error"] == "not_waiting"
    assert await Note.objects.filter(title="Buy milk").acount() == 1
    await ws.disconnect()


async def test_cancel_drops_the_cards_write(session: tuple[Client, SessionRef], chat: Conversation) -> None:
    confirmation = await confirmation_for(session[1], chat, "Buy milk")
    ws = await opened(session[0])
    decided = await reply_to(ws, {"type": "cancel", "confirmation": str(confirmation.pk)}, "decided")
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


async def test_edit_regenerate_and_switch_frames_answer_and_tell_the_line_changed(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any, model_server: Any
) -> None:
    # given a question answered, and a socket on the chat
    from agent import turns
    from agent.models import Message
    from agent.tasks import run_turn
    from tests.support.model_server import answer

    ref = session[1]
    model_server.push(answer("Cats purr."), answer("Cats nap."))
    turn = await sync_to_async(turns.start)(ref, chat.pk, "cats?", impersonated=False)
    await sync_to_async(run_turn)(str(turn.pk))
    said = await Message.objects.filter(conversation=chat, role="assistant").afirst()
    ws = await opened(session[0])
    await subscribed(ws, chat)

    # when the answer is regenerated over the socket
    await ws.send_json_to({"type": "regenerate", "conversation": str(chat.pk), "message": str(said.pk), "ref": "r1"})
    frames = {}
    while len(frames) < 2:
        frame = await ws.receive_json_from(timeout=5)
        if frame["type"] in ("accepted", "line_changed"):
            frames[frame["type"]] = frame

    # then the turn starts and the tab is told to read the line again
    assert (await Turn.objects.aget(pk=frames["accepted"]["turn"])).user_message_id is not None
    assert frames["line_changed"] == {"type": "line_changed", "conversation": str(chat.pk)}
    busy = await reply_to(ws, {"type": "switch", "conversation": str(chat.pk), "message": str(said.pk)}, "error")
    assert busy["error"] == "busy"
    edit = {"type": "edit", "conversation": str(chat.pk), "message": str(said.pk), "text": "x"}
    assert (await reply_to(ws, edit, "error"))["error"] == "not_found"  # an answer is not the user's to edit
    await ws.disconnect()


async def test_a_message_after_a_switch_to_an_older_version_reaches_a_new_socket_without_a_resync(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any, model_server: Any
) -> None:
    # given a chat shown at an older version, whose newer one holds the chat's latest messages
    from agent import turns
    from agent.conversations import add_message
    from agent.models import Message
    from agent.tasks import run_turn
    from tests.support.model_server import answer

    ref = session[1]
    model_server.push(answer("Cats purr."), answer("Cats nap."))
    await sync_to_async(run_turn)(str((await sync_to_async(turns.start)(ref, chat.pk, "cats?", impersonated=False)).pk))
    purr = await Message.objects.filter(conversation=chat, role="assistant").afirst()
    await sync_to_async(run_turn)(
        str((await sync_to_async(turns.regenerate)(ref, chat.pk, purr.pk, impersonated=False)).pk)
    )
    await sync_to_async(turns.switch_version)(ref, chat.pk, purr.pk, impersonated=False)
    ws = await opened(session[0])
    await subscribed(ws, chat)

    # when a message joins the line
    added = await sync_to_async(add_message)(ref, chat.pk, {"content": "more?"}, impersonated=False)

    # then the socket is told of it as the next message, not asked to read everything again
    frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "message" and frame["message"]["id"] == str(added.pk)
    await ws.disconnect()
