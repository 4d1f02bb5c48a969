"""Races as races: two tabs edit, switch, regenerate and decide cards at once, over either transport.

Each test opens two tabs of the user's session on the chat (the transport of the case: the
websocket or the event stream), releases two doors together in threads on their own database
connections (``races.at_once``), runs the turn that won, then lets each tab do what the page does
with its frames: add a ``message``, read the line again on ``line_changed`` or a resync. Nothing
may be lost: each tab ends showing exactly the active line, which is one path, and every door that
was refused said so.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from agent import confirmations, turns
from agent.access import SessionRef
from agent.conversations import list_messages
from agent.core.errors import Busy, NotFound, NotWaiting
from agent.models import Confirmation, Conversation, Message, Turn
from agent.tasks import run_turn
from tests.notes.models import Note
from tests.support.model_server import answer, tool_calls
from tests.support.races import at_once
from tests.support.tabs import TRANSPORTS, Tab
from tests.support.turns import one_active_line

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


class Mirror:
    """What a tab shows of the chat, kept from its frames as the page keeps it."""

    def __init__(self, tab: Tab, ref: SessionRef, chat: Conversation) -> None:
        self.tab, self.ref, self.chat = tab, ref, chat
        self.shown = {m["id"]: m for m in tab.first["messages"]}
        self.frames: list[dict[str, Any]] = []

    async def catch_up(self, quiet_s: float = 1.0) -> list[str]:
        """Apply every frame until the tab has been quiet a while; the ids shown, oldest first."""
        while not self._hung_up() and not await self.tab.nothing_for(quiet_s):
            frame = await self.tab.frame()
            self.frames.append(frame)
            if frame["type"] == "message":
                self.shown[frame["message"]["id"]] = frame["message"]
            elif frame["type"] in ("line_changed", "ready"):
                line = await sync_to_async(list_messages)(self.ref, self.chat.pk, impersonated=False)
                self.shown = {m["id"]: m for m in line}
        return [m["id"] for m in sorted(self.shown.values(), key=lambda m: m["seq"])]

    def _hung_up(self) -> bool:
        """An event stream the server ended (after a resync) has nothing more to read."""
        stream = self.tab.stream
        return stream is not None and stream.finished and b"\n\n" not in stream.buffer


async def two_tabs(transport: str, session: tuple[Client, SessionRef], chat: Conversation) -> list[Mirror]:
    client, ref = session
    return [Mirror(await Tab.open(transport, client, chat), ref, chat) for _ in range(2)]


async def race(*calls: Callable[[], Any]) -> list[tuple[str, Any]]:
    return await sync_to_async(at_once, thread_sensitive=False)(*calls)


async def run(turn: Turn) -> None:
    await sync_to_async(run_turn, thread_sensitive=False)(str(turn.pk))


async def settled(chat: Conversation, tabs: list[Mirror]) -> list[Message]:
    """The line, checked to be one path, and every tab showing exactly it."""
    line = await sync_to_async(one_active_line)(chat)
    for mirror in tabs:
        assert await mirror.catch_up() == [str(m.pk) for m in line], mirror.frames
        await mirror.tab.close()
    return line


@pytest.fixture
def answered(ref: SessionRef, chat: Conversation, endpoint: Any, model_server: Any) -> list[Message]:
    """A chat of one question answered."""
    model_server.push(answer("Cats purr."))
    run_turn(str(turns.start(ref, chat.pk, "cats?", impersonated=False).pk))
    return list(Message.objects.filter(conversation=chat).order_by("seq"))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_two_tabs_editing_the_same_message_at_once(
    session: tuple[Client, SessionRef], chat: Conversation, answered: list[Message], model_server: Any, transport: str
) -> None:
    ref = session[1]
    tabs = await two_tabs(transport, session, chat)
    model_server.push(answer("Kittens play."))
    asked = answered[0].pk
    outcomes = await race(
        lambda: turns.edit_message(ref, chat.pk, asked, "kittens?", impersonated=False),
        lambda: turns.edit_message(ref, chat.pk, asked, "puppies?", impersonated=False),
    )
    won = [value for kind, value in outcomes if kind == "ok"]
    lost = [value for kind, value in outcomes if kind == "error"]
    assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], Busy)  # the other tab is told, not ignored
    await run(won[0])
    line = await settled(chat, tabs)
    assert [m.content for m in line if m.role == Message.Role.USER] == [won[0].text]
    assert [m.content for m in line if m.role == Message.Role.ASSISTANT] == ["Kittens play."]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_two_tabs_switching_to_different_versions_at_once(
    session: tuple[Client, SessionRef], chat: Conversation, answered: list[Message], model_server: Any, transport: str
) -> None:
    ref = session[1]
    model_server.push(answer("Cats nap."), answer("Cats hunt."))
    for _ in range(2):
        shown = await sync_to_async(lambda: Message.objects.get(role=Message.Role.ASSISTANT, active=True))()
        await run(await sync_to_async(turns.regenerate)(ref, chat.pk, shown.pk, impersonated=False))
    first, second, _third = await sync_to_async(
        lambda: list(Message.objects.filter(role=Message.Role.ASSISTANT).order_by("seq"))
    )()
    tabs = await two_tabs(transport, session, chat)
    outcomes = await race(
        lambda: turns.switch_version(ref, chat.pk, first.pk, impersonated=False),
        lambda: turns.switch_version(ref, chat.pk, second.pk, impersonated=False),
    )
    assert all(kind == "ok" or isinstance(value, Busy) for kind, value in outcomes), outcomes
    line = await settled(chat, tabs)
    assert line[-1].pk in {first.pk, second.pk}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_tab_regenerating_while_another_switches(
    session: tuple[Client, SessionRef], chat: Conversation, answered: list[Message], model_server: Any, transport: str
) -> None:
    ref = session[1]
    model_server.push(answer("Cats nap."), answer("Cats hunt."))
    await run(await sync_to_async(turns.regenerate)(ref, chat.pk, answered[1].pk, impersonated=False))
    tabs = await two_tabs(transport, session, chat)
    current = await sync_to_async(lambda: Message.objects.get(content="Cats nap."))()
    outcomes = await race(
        lambda: turns.regenerate(ref, chat.pk, current.pk, impersonated=False),
        lambda: turns.switch_version(ref, chat.pk, answered[1].pk, impersonated=False),
    )
    regenerated, switched = outcomes
    # one of them takes the chat; the other is busy, or finds the answer it named gone from the line
    assert regenerated[0] == "ok" or isinstance(regenerated[1], (Busy, NotFound)), regenerated
    assert switched[0] == "ok" or isinstance(switched[1], Busy), switched
    if regenerated[0] == "ok":
        await run(regenerated[1])
    await settled(chat, tabs)


async def retitle_confirmation(ref: SessionRef, chat: Conversation, user: Any, model_server: Any) -> Confirmation:
    """A card, waiting, to retitle the user's note "Buy mlik" as the model's "Buy mlik!"."""
    note = await sync_to_async(Note.objects.create)(owner=user, title="Buy mlik")
    model_server.push(tool_calls(("notes_retitle", {"note_id": note.pk, "title": "Buy mlik!"})))
    await run(await sync_to_async(turns.start)(ref, chat.pk, "fix my note", impersonated=False))
    return await sync_to_async(Confirmation.objects.get)()


def titles_shown(notice: dict[str, Any]) -> list[str]:
    return [row["value"] for row in notice["confirmation"]["fields"] if row["key"] == "title"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_card_confirmed_with_an_edit_shows_the_value_that_ran_in_every_tab(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any, model_server: Any, user: Any, transport: str
) -> None:
    ref = session[1]
    confirmation = await retitle_confirmation(ref, chat, user, model_server)
    tabs = await two_tabs(transport, session, chat)
    await sync_to_async(confirmations.confirm)(ref, confirmation.pk, impersonated=False, edits={"title": "Buy milk"})
    outcome = (await settled(chat, tabs))[-1]
    for mirror in tabs:
        (notice,) = [f["message"] for f in mirror.frames if f["type"] == "message"]
        assert notice["id"] == str(outcome.pk) and titles_shown(notice) == ["Buy milk"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_two_tabs_deciding_a_card_at_once_each_see_the_one_decision_with_the_value_that_ran(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any, model_server: Any, user: Any, transport: str
) -> None:
    ref = session[1]
    confirmation = await retitle_confirmation(ref, chat, user, model_server)
    tabs = await two_tabs(transport, session, chat)
    outcomes = await race(
        lambda: confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Buy milk"}),
        lambda: confirmations.cancel(ref, confirmation.pk, impersonated=False),
    )
    decided = [value for kind, value in outcomes if kind == "ok"]
    assert len(decided) == 1 and all(isinstance(v, NotWaiting) for kind, v in outcomes if kind == "error")
    line = await settled(chat, tabs)
    outcome = line[-1]
    assert outcome.confirmation_id == confirmation.pk and outcome.notice_code == f"confirmation_{decided[0].status}"
    for mirror in tabs:  # the outcome's frame: on a confirm, the card's rows as they ran, the user's value in them
        frames = [f["message"] for f in mirror.frames if f["type"] == "message"]
        (notice,) = [m for m in frames if m["id"] == str(outcome.pk)]
        if decided[0].status == Confirmation.Status.DONE:
            assert titles_shown(notice) == ["Buy milk"]
    assert await sync_to_async(Note.objects.filter(title="Buy milk").count)() == (
        1 if decided[0].status == "done" else 0
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_card_confirmed_while_another_tab_regenerates_its_answer(
    session: tuple[Client, SessionRef], chat: Conversation, endpoint: Any, model_server: Any, transport: str
) -> None:
    ref = session[1]
    model_server.push(
        tool_calls(("notes_create", {"title": "Buy milk"})), tool_calls(("notes_create", {"title": "Buy milk"}))
    )
    await run(await sync_to_async(turns.start)(ref, chat.pk, "note: buy milk", impersonated=False))
    confirmation = await sync_to_async(Confirmation.objects.get)()
    confirmation_message = await sync_to_async(Message.objects.get)(confirmation=confirmation, role=Message.Role.TOOL)
    tabs = await two_tabs(transport, session, chat)
    outcomes = await race(
        lambda: confirmations.confirm(ref, confirmation.pk, impersonated=False),
        lambda: turns.regenerate(ref, chat.pk, confirmation_message.pk, impersonated=False),
    )
    if outcomes[1][0] == "ok":
        await run(outcomes[1][1])
    await settled(chat, tabs)
    status = (await sync_to_async(Confirmation.objects.get)(pk=confirmation.pk)).status
    # confirmed first (the note is written, once), or cancelled by the regenerate that took its answer off the line
    assert (status, await sync_to_async(Note.objects.count)()) in {("done", 1), ("cancelled", 0)}
    if status == "cancelled":
        assert await sync_to_async(Confirmation.objects.filter(status="waiting").count)() == 1  # proposed anew
