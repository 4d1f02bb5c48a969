"""``events.flush``: a process that must know its events went out (one about to exit, a caller that goes on
only once they have) waits for every send it handed over, and only for those."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Iterator

import pytest
from channels.layers import InMemoryChannelLayer

from agent.core import events


class HeldLayer(InMemoryChannelLayer):
    """A layer whose group sends wait until the test lets them through, and are then recorded."""

    gate = threading.Event()
    sent: list[tuple[str, dict[str, Any]]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await asyncio.to_thread(self.gate.wait)
        self.sent.append((group, message))


@pytest.fixture
def held_layer(settings: Any) -> Iterator[type[HeldLayer]]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.HeldLayer"}}
    HeldLayer.gate.clear()
    HeldLayer.sent = []
    yield HeldLayer
    HeldLayer.gate.set()  # nothing stays held for the next test
    assert events.flush()


CHAT = "3f1a5e2c-0000-4000-8000-000000000001"


def test_flush_waits_for_a_send_in_flight_and_reports_one_it_could_not_wait_out(held_layer: type[HeldLayer]) -> None:
    events.answer_delta(CHAT, "t", 1, "partial")  # handed over at once, not waited for
    # while the layer holds the send, a short flush comes back saying something is left
    assert events.flush(timeout=0.2) is False
    assert held_layer.sent == []
    # once the layer lets it through, flush returns when it has gone, and it has
    held_layer.gate.set()
    assert events.flush(timeout=5) is True
    assert [(group, message["text"]) for group, message in held_layer.sent] == [(events.topic(CHAT), "partial")]


def test_flush_with_nothing_handed_over_returns_at_once() -> None:
    assert events.flush(timeout=0) is True


def test_flush_refuses_to_wait_on_the_loop_that_would_send(held_layer: type[HeldLayer]) -> None:
    events.answer_delta(CHAT, "t", 1, "partial")
    outcome: list[object] = []
    ran = threading.Event()

    def on_the_sending_loop() -> None:
        try:
            outcome.append(events.flush(timeout=0))
        except RuntimeError as refusal:
            outcome.append(refusal)
        ran.set()

    events.call_later(0, on_the_sending_loop)
    assert ran.wait(5)
    assert [type(o) for o in outcome] == [RuntimeError]  # waiting there would hold up the very send it waits for
