"""At most ``MAX_STREAMS_PER_USER`` open websockets and event streams per user, together, counted in
the channel layer's Redis (so every process and host agrees), freed as each ends, and freed by the
lease when a process dies without saying so."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.test import Client

from agent.access import SessionRef
from agent.models import Conversation
from agent.web.consumers import CLOSE_TOO_MANY_STREAMS
from tests.support.sessions import login
from tests.support.sockets import close_code, error_frame, finish_refused, opened, parsed, socket
from tests.support.streams import opened as stream_opened

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

REDIS_URL = django_settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"]


@pytest.fixture(autouse=True)
def _no_slots_left_over(user: Any) -> Any:
    """Each test starts with the user holding no slot (another run's may linger for a lease)."""
    store = redis.Redis.from_url(REDIS_URL)
    store.delete(f"asgi:agent:streams:{user.pk}")
    yield store
    store.delete(f"asgi:agent:streams:{user.pk}")
    store.close()


def cap(settings: Any, streams: int, lease_s: int = 60) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_STREAMS_PER_USER": streams, "STREAM_LEASE_S": lease_s}


async def refused_socket(client: Client) -> tuple[int | None, list[Any]]:
    ws = socket(client)
    connected, _ = await ws.connect(timeout=5)
    assert connected  # accepted, so the page reads why it closes
    code, frames = await close_code(ws, within=5)
    await finish_refused(ws)
    return code, parsed(frames)


async def test_the_21st_socket_of_one_user_is_refused_with_4429_and_a_message(
    session: tuple[Client, SessionRef],
) -> None:
    client, _ref = session
    sockets = [await opened(client) for _ in range(20)]

    code, frames = await refused_socket(client)

    assert code == CLOSE_TOO_MANY_STREAMS == 4429
    assert frames == [error_frame("too_many_streams")]
    assert "too many tabs" in frames[0]["message"]
    await sockets.pop().disconnect()
    sockets.append(await opened(client))  # one ended: its place is free again
    for ws in sockets:
        await ws.disconnect()


async def test_the_21st_event_stream_of_one_user_is_refused_429(
    session: tuple[Client, SessionRef], chat: Conversation
) -> None:
    client, _ref = session
    streams = [await stream_opened(client, conversation=chat.pk) for _ in range(20)]
    for stream in streams:
        assert stream.status == 200
        assert (await stream.event())[1]["type"] == "subscribed"

    refused = await stream_opened(client, conversation=chat.pk)

    assert refused.status == 429
    assert {"type": "error", **await refused.body_json()} == error_frame("too_many_streams")
    await streams.pop().close()
    again = await stream_opened(client, conversation=chat.pk)
    assert again.status == 200
    for stream in [*streams, again]:
        await stream.close()


async def test_sockets_and_event_streams_count_together(
    session: tuple[Client, SessionRef], chat: Conversation, settings: Any
) -> None:
    cap(settings, 3)
    client, _ref = session
    sockets = [await opened(client), await opened(client)]
    stream = await stream_opened(client, conversation=chat.pk)
    assert stream.status == 200

    code, _frames = await refused_socket(client)
    extra = await stream_opened(client, conversation=chat.pk)

    assert (code, extra.status) == (4429, 429)
    await stream.close()
    sockets.append(await opened(client))  # the stream's place went back when it ended
    for ws in sockets:
        await ws.disconnect()


@pytest.fixture
def other_client(make_user: Any) -> Client:
    return login(make_user())[0]


async def test_another_users_streams_do_not_count(
    session: tuple[Client, SessionRef], other_client: Client, settings: Any
) -> None:
    cap(settings, 1)
    client, _ref = session
    mine = await opened(client)

    theirs = await opened(other_client)

    await mine.disconnect()
    await theirs.disconnect()


async def test_a_live_socket_keeps_its_place_past_its_lease(session: tuple[Client, SessionRef], settings: Any) -> None:
    cap(settings, 1, lease_s=1)
    client, _ref = session
    live = await opened(client)

    await asyncio.sleep(1.6)  # longer than the lease: only renewal keeps the place

    code, _frames = await refused_socket(client)
    assert code == 4429
    await live.disconnect()


async def test_the_places_of_a_process_that_died_free_when_their_lease_runs_out(
    session: tuple[Client, SessionRef], user: Any, settings: Any, _no_slots_left_over: Any
) -> None:
    # given two places taken by a process that died: no release, no renewal, a lease of a second
    cap(settings, 2)
    key = f"asgi:agent:streams:{user.pk}"
    _no_slots_left_over.zadd(key, {"dead-1": time.time() + 1, "dead-2": time.time() + 1})
    client, _ref = session
    code, _frames = await refused_socket(client)
    assert code == 4429
    # when the lease runs out (each place's score is the moment its lease ends)
    _no_slots_left_over.zadd(key, {"dead-1": time.time() - 0.001, "dead-2": time.time() - 0.001})
    # then the user's sockets open again, and each ended one gives its place back
    first, second = await opened(client), await opened(client)
    await first.disconnect()
    await second.disconnect()
    assert _no_slots_left_over.zcard(key) == 0
