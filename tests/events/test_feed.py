"""One feed, two transports: every event a tab hears reaches it alike over the websocket and the event stream.

Each case sends a real event the way the parts send it (after commit, on the
chat's or the session's group, through the Redis layer) and reads the frame
the tab gets through the test site's ASGI stack, once per transport.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from agent import conversations
from agent.access import SessionRef
from agent.core import events
from agent.models import Conversation, Message
from agent.web.feed import Feed
from agent.web.rendering import page_view
from tests.support.sockets import error_frame
from tests.support.tabs import TRANSPORTS, Tab

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]

TURN = str(uuid.UUID(int=7))
FILE = str(uuid.UUID(int=8))


def _message(ref: SessionRef, chat: Conversation) -> dict[str, Any]:
    message = conversations.append_message(chat.pk, role=Message.Role.ASSISTANT, content="Hello")
    return {
        "type": "message",
        "message": page_view(conversations.get_message(ref, chat.pk, message.pk, impersonated=False)),
    }


def _attachment(ref: SessionRef, chat: Conversation) -> dict[str, Any]:
    events.attachment_processed(chat.pk, FILE)
    return {"type": "attachment", "conversation": str(chat.pk), "attachment": FILE}


def _turn(ref: SessionRef, chat: Conversation) -> dict[str, Any]:
    events.turn_changed(chat.pk, TURN, "running")
    return {"type": "turn", "conversation": str(chat.pk), "turn": TURN, "status": "running"}


def _conversation(ref: SessionRef, chat: Conversation) -> dict[str, Any]:
    conversations.rename_conversation(ref, chat.pk, "Renamed", impersonated=False)
    view = conversations.conversation_view(Conversation.objects.get(pk=chat.pk))
    return {"type": "conversation", "conversation": view}


def _session(ref: SessionRef, chat: Conversation) -> dict[str, Any]:
    events.session_ended(ref.group, final="session_gone")
    return error_frame("session_gone")


def _delta(ref: SessionRef, chat: Conversation) -> dict[str, Any]:
    events.answer_delta(chat.pk, TURN, 1, "*Hel*")
    text = {"conversation": str(chat.pk), "turn": TURN, "round": 1, "text": "*Hel*"}
    return {"type": "delta", **text, "html": "<p><em>Hel</em></p>\n"}


def _line(ref: SessionRef, chat: Conversation) -> dict[str, Any]:
    events.line_changed(chat.pk)
    return {"type": "line_changed", "conversation": str(chat.pk)}


SENT: dict[str, Callable[[SessionRef, Conversation], dict[str, Any]]] = {
    events.MESSAGE_ADDED: _message,
    events.ATTACHMENT_PROCESSED: _attachment,
    events.TURN_CHANGED: _turn,
    events.CONVERSATION_CHANGED: _conversation,
    events.SESSION_ENDED: _session,
    events.ANSWER_DELTA: _delta,
    events.LINE_CHANGED: _line,
}
"""How each event is sent, and the frame a tab gets for it."""


async def test_every_event_kind_has_a_case_here_and_a_handler_in_the_feed() -> None:
    assert set(SENT) == set(events.KINDS) <= set(Feed.HANDLERS)


@pytest.mark.parametrize("kind", events.KINDS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_each_event_reaches_the_tab_as_the_same_frame_over_either_transport(
    session: tuple[Client, SessionRef], chat: Conversation, transport: str, kind: str
) -> None:
    client, ref = session
    tab = await Tab.open(transport, client, chat)
    expected = await sync_to_async(SENT[kind])(ref, chat)
    assert await tab.frame() == expected
    if kind == events.SESSION_ENDED:
        assert await tab.ended()
    await tab.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_turns_events_reach_the_tab_in_the_order_sent(
    session: tuple[Client, SessionRef], chat: Conversation, transport: str
) -> None:
    client, ref = session
    tab = await Tab.open(transport, client, chat)

    def a_turn() -> list[str]:
        _turn(ref, chat), _delta(ref, chat), _message(ref, chat), _line(ref, chat)
        events.turn_changed(chat.pk, TURN, "ended")
        return ["turn", "delta", "message", "line_changed", "turn"]

    sent = await sync_to_async(a_turn)()
    assert [(await tab.frame())["type"] for _ in sent] == sent
    await tab.close()
