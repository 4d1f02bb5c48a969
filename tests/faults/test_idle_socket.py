"""An idle tab over the Redis channel layer stays open and keeps hearing its chat.

redis-py 8 times out a socket read after 5 s, the length of channels-redis's
own blocking read: with the layer configured naively every socket died about
5.5 s after it opened (close 1011), so tabs missed every later event.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from agent import conversations
from agent.access import SessionRef
from agent.models import Conversation
from tests.support.harness import Stack, Tab

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

IDLE_S = 16
"""Past three of redis-py's 5 s read time-outs and five of the stack's socket re-checks (every 3 s)."""


def test_an_idle_subscribed_socket_stays_open_and_hears_the_next_event(
    stack: Stack,
    tabs: Callable[..., Tab],
    user: Any,
    ref: SessionRef,
    chat: Conversation,
    figure: Callable[[str, float], None],
) -> None:
    # given: a tab subscribed to its chat over daphne and Redis, with nothing to hear
    stack.start("daphne")
    tab = tabs(ref.session_key)
    tab.subscribe(chat.pk)
    # when: it stays idle for IDLE_S seconds
    still_open = tab.stays_open(IDLE_S)
    figure("idle socket open for", (tab.closed_at or time.monotonic()) - tab.opened_at)
    assert still_open, f"the idle socket closed with {tab.close_code}:\n{stack['daphne'].tail(1500)}"
    # then: the next event of its chat reaches it
    sent = time.monotonic()
    message = conversations.add_message(ref, chat.pk, {"content": "still there?"}, impersonated=False)
    arrived = tab.message_frame(lambda view: view["id"] == str(message.pk), 10, "the message after the idle time")
    figure("event after the idle time reached the tab in", arrived - sent)
