"""Drafts of a streamed answer reach a socket only under a scope checked within the last second."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from asgiref.sync import sync_to_async
from django.contrib.sessions.models import Session
from django.test import Client

from agent.access import SessionRef
from agent.core import events
from agent.web.feed import Feed
from tests.support.sockets import close_code, error_frame, opened, parsed, subscribed

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]

TURN = "5b7e2c8e-0000-4000-8000-000000000001"


@pytest.fixture
def no_idle_recheck(settings: Any) -> None:
    """Only a draft makes these sockets check their session again."""
    settings.AGENT = {**settings.AGENT, "SOCKET_RECHECK_S": 3600}


def draft(chat: Any, text: str, round_number: int = 1) -> Any:
    return sync_to_async(events.answer_delta)(chat.pk, TURN, round_number, text)


async def test_a_subscribed_socket_gets_each_draft_as_a_delta_frame(
    no_idle_recheck: None, session: tuple[Client, SessionRef], chat: Any
) -> None:
    ws = await opened(session[0])
    await subscribed(ws, chat)
    await draft(chat, "Hello, wor")
    assert await ws.receive_json_from(timeout=5) == {
        "type": "delta",
        "conversation": str(chat.pk),
        "turn": TURN,
        "round": 1,
        "text": "Hello, wor",
        "html": "<p>Hello, wor</p>\n",
    }
    await ws.disconnect()


async def test_a_draft_comes_rendered_by_the_rules_of_stored_answers(
    no_idle_recheck: None, session: tuple[Client, SessionRef], chat: Any
) -> None:
    ws = await opened(session[0])
    await subscribed(ws, chat)
    await draft(chat, "- Ideas\n- *more* <b>raw</b> [x](javascript:alert(1)) ![i](https://example.com/a.png)")
    html = (await ws.receive_json_from(timeout=5))["html"]
    assert "<ul>" in html and "<li>Ideas</li>" in html and "<em>more</em>" in html
    assert "&lt;b&gt;raw&lt;/b&gt;" in html
    assert 'href="javascript' not in html
    assert "<img" not in html
    await ws.disconnect()


async def test_a_socket_whose_session_ended_gets_no_draft_and_closes(
    no_idle_recheck: None, session: tuple[Client, SessionRef], chat: Any, stale_checks: Callable[[], None]
) -> None:
    client = session[0]
    ws = await opened(client)
    await subscribed(ws, chat)
    await sync_to_async(Session.objects.filter(session_key=client.session.session_key).delete)()  # no signal
    stale_checks()  # the socket's last check is now too old to trust
    await draft(chat, "SECRET-DRAFT-TEXT")
    code, frames = await close_code(ws, within=5)
    assert code == 4401 and parsed(frames) == [error_frame("session_gone")]
    await ws.disconnect()


async def test_a_check_serves_the_drafts_of_one_second_and_the_next_draft_checks_again(
    no_idle_recheck: None, session: tuple[Client, SessionRef], chat: Any, stale_checks: Callable[[], None]
) -> None:
    client = session[0]
    ws = await opened(client)
    await subscribed(ws, chat)
    await draft(chat, "first")  # checks the session now
    assert (await ws.receive_json_from(timeout=5))["text"] == "first"
    await sync_to_async(Session.objects.filter(session_key=client.session.session_key).delete)()
    await draft(chat, "first, second")  # within the second: the check just made still serves
    assert (await ws.receive_json_from(timeout=5))["text"] == "first, second"
    stale_checks()
    await draft(chat, "first, second, third")  # a new check, which finds the session gone
    code, frames = await close_code(ws, within=5)
    assert code == 4401 and parsed(frames) == [error_frame("session_gone")]
    await ws.disconnect()


async def test_a_socket_not_subscribed_to_the_chat_gets_no_draft(
    no_idle_recheck: None, session: tuple[Client, SessionRef], chat: Any, others_chat: Any
) -> None:
    ws = await opened(session[0])
    await subscribed(ws, chat)
    await draft(others_chat, "someone else's answer")
    await draft(chat, "mine")
    assert (await ws.receive_json_from(timeout=5))["text"] == "mine"
    await ws.disconnect()


def unstarted_feed() -> Feed:
    """A tab's feed whose queue is filled by hand and never delivered."""
    ref = SessionRef("k", 1)
    return Feed(None, None, "c", actor=ref, impersonated=False, request_language=None)  # type: ignore[arg-type]


async def test_a_newer_draft_replaces_one_the_tab_has_not_got_yet() -> None:
    feed = unstarted_feed()
    event = {"type": events.ANSWER_DELTA, "conversation": "c", "turn": TURN, "round": 1}
    feed.enqueue(event | {"text": "a"})
    feed.enqueue(event | {"text": "ab"})
    feed.enqueue(event | {"round": 2, "text": "c"})
    feed.enqueue({"type": events.MESSAGE_ADDED, "conversation": "c", "message": "m"})
    feed.enqueue(event | {"round": 2, "text": "cd"})
    assert [e.get("text") for e in feed.inbox] == ["ab", "c", None, "cd"]


async def test_a_subscribe_drops_the_chats_queued_drafts_which_its_reply_may_have_overtaken() -> None:
    feed = unstarted_feed()
    draft_of = {"type": events.ANSWER_DELTA, "turn": TURN, "round": 1, "text": "old"}
    feed.enqueue(draft_of | {"conversation": "a"})
    feed.enqueue({"type": events.MESSAGE_ADDED, "conversation": "a", "message": "m"})
    feed.enqueue(draft_of | {"conversation": "b"})
    feed.subscribe("a", None)
    assert [(e["type"], e["conversation"]) for e in feed.inbox] == [
        (events.MESSAGE_ADDED, "a"),
        (events.ANSWER_DELTA, "b"),
    ]
