"""The channel layer the app ships (agent.live): sockets that stay open, groups that are left, no silent drops."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Iterator

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings as django_settings
from django.test import Client, override_settings

from agent import conversations
from agent.access import SessionRef
from agent.checks.services import check_channel_layer_timeout
from agent.core import events
from agent.core.events import losses
from agent.live.channel_layer import (
    SOCKET_TIMEOUT_S,
    RedisChannelLayer,
    redis_channel_layer,
    redis_default_socket_timeout,
)
from tests.support.sockets import opened, subscribed
from tests.support.waiting import free_port

BLOCKING_READ_S = RedisChannelLayer.brpop_timeout
REDIS_URL = django_settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"]


def w001_for(layers: dict[str, Any]) -> list[str]:
    with override_settings(CHANNEL_LAYERS=layers):
        return [warning.id for warning in check_channel_layer_timeout()]


# -- configuration and agent.W001 -------------------------------------------------------------


def test_the_shipped_entry_waits_longer_than_the_layers_blocking_read() -> None:
    entry = redis_channel_layer("redis://redis.example:6379/0")
    host = entry["CONFIG"]["hosts"][0]
    assert entry["BACKEND"] == "agent.layers.RedisChannelLayer"
    assert host["address"] == "redis://redis.example:6379/0"
    assert host["socket_timeout"] == SOCKET_TIMEOUT_S >= 2 * BLOCKING_READ_S
    assert w001_for({"default": entry}) == []


def test_the_shipped_entry_sets_capacity_expiry_and_pool_on_purpose() -> None:
    config = redis_channel_layer("redis://redis.example:6379/0")["CONFIG"]
    assert config["capacity"] >= 1_000 and config["expiry"] == 60 and config["group_expiry"] == 3_600
    assert config["hosts"][0]["max_connections"] >= 50


@pytest.mark.parametrize(
    "host",
    [
        {"address": "redis://127.0.0.1:6379/0", "socket_timeout": 5},
        "redis://127.0.0.1:6379/0?socket_timeout=5",
        {"address": "redis://127.0.0.1:6379/0?socket_timeout=3", "socket_timeout": 30},
        ("127.0.0.1", 6379) if redis_default_socket_timeout() is not None else {"socket_timeout": 4},
    ],
    ids=["dict", "query", "query-wins", "redis-default"],
)
def test_w001_a_redis_layer_whose_socket_timeout_cuts_its_blocking_read(host: Any) -> None:
    layers = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [host]}}}
    assert w001_for(layers) == ["agent.W001"]


def test_w001_names_the_function_that_fixes_it() -> None:
    layers = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 5}]},
        }
    }
    with override_settings(CHANNEL_LAYERS=layers):
        (warning,) = check_channel_layer_timeout()
    assert "agent.layers.redis_channel_layer" in warning.hint


@pytest.mark.parametrize(
    "layers",
    [
        {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": None}]},
            }
        },
        {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0?socket_timeout=20"]},
            }
        },
        {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
    ],
    ids=["no-timeout", "long-timeout", "in-memory"],
)
def test_w001_is_quiet_for_layers_that_keep_their_reads(layers: dict[str, Any]) -> None:
    assert w001_for(layers) == []


# -- idle sockets ------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(30)
async def test_an_idle_subscribed_socket_outlives_the_blocking_read_and_gets_the_next_event(
    session: tuple[Client, SessionRef], chat: Any
) -> None:
    client, ref = session
    ws = await opened(client)
    await subscribed(ws, chat)
    assert await ws.receive_nothing(timeout=BLOCKING_READ_S + 1.5)  # the layer's read ended empty at least once
    await sync_to_async(conversations.add_message)(ref, chat.pk, {"content": "after a quiet while"}, impersonated=False)
    frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "message" and frame["message"]["content"] == "after a quiet while"
    await ws.disconnect()


# -- groups ------------------------------------------------------------------------------------


def group_sizes(url: str) -> dict[str, int]:
    client = redis.Redis.from_url(url)
    try:
        return {key.decode(): client.zcard(key) for key in client.scan_iter(match="asgi:group:*")}
    finally:
        client.close()


@pytest.mark.asyncio
async def test_a_thousand_channels_leave_a_group_at_once_without_running_out_of_connections() -> None:
    layer = get_channel_layer()
    group = f"agent.test.{time.monotonic_ns()}"
    channels = [await layer.new_channel() for _ in range(1000)]
    for start in range(0, len(channels), 100):
        await asyncio.gather(*(layer.group_add(group, name) for name in channels[start : start + 100]))
    await asyncio.gather(*(layer.group_discard(group, name) for name in channels))
    assert group_sizes(REDIS_URL).get(f"asgi:group:{group}", 0) == 0


@pytest.fixture
def private_redis() -> Iterator["PrivateRedis"]:
    server = PrivateRedis(free_port())  # a port of its own: two suites may run this at once
    server.start()
    try:
        yield server
    finally:
        server.stop()


class PrivateRedis:
    """A redis-server of the test's own, which it can stop and start again with its data."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.dir = tempfile.mkdtemp(prefix="agent-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.dir,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dbfilename",
                "dump.rdb",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def restart_later(self, down_s: float) -> None:
        """Save, stop, and start again after ``down_s`` seconds: what it held comes back."""
        redis.Redis.from_url(self.url).save()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        time.sleep(down_s)
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
async def test_a_socket_that_ends_while_redis_refuses_still_leaves_every_group(
    private_redis: PrivateRedis, settings: Any, session: tuple[Client, SessionRef], chat: Any
) -> None:
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(private_redis.url)}
    ws = await opened(session[0])
    await subscribed(ws, chat)
    assert sorted(group_sizes(private_redis.url).values()) == [1, 1, 1, 1]  # session, user, site and chat
    # when: Redis goes away under the open socket and comes back a second later
    await asyncio.to_thread(private_redis.restart_later, 1.0)
    try:
        await ws.disconnect(timeout=1)
    except Exception:
        pass  # the consumer may have ended on the layer's error already: that is the case under test
    # then: the socket's groups are empty again, without waiting for them to expire
    deadline = time.monotonic() + 15
    while any(group_sizes(private_redis.url).values()) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not any(group_sizes(private_redis.url).values())


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
async def test_sockets_that_come_and_go_leave_no_buffer_even_when_an_event_reaches_them_late(
    session: tuple[Client, SessionRef], chat: Any
) -> None:
    # given: one socket held open, so the process keeps reading its channel in Redis
    client, _ref = session
    held = await opened(client)
    await subscribed(held, chat)
    layer = get_channel_layer()
    buffers_before = set(layer.receive_buffer)
    redis_client = redis.Redis.from_url(REDIS_URL)
    topic_key = f"asgi:group:{events.topic(chat.pk)}"
    (held_channel,) = redis_client.zrange(topic_key, 0, -1)
    # when: sockets come and go, and an event sent before each left its groups reaches it after
    for number in range(5):
        ws = await opened(client)
        await subscribed(ws, chat)
        (channel,) = set(redis_client.zrange(topic_key, 0, -1)) - {held_channel}
        await ws.disconnect()
        turn = {"conversation": str(chat.pk), "turn": f"t{number}", "status": "running"}
        await layer.send(channel.decode(), {"type": events.TURN_CHANGED, **turn})
        await layer.group_send(events.topic(chat.pk), {"type": events.TURN_CHANGED, **turn})
        assert await held.receive_json_from(timeout=5) == {"type": "turn", **turn}  # read after the late one
    redis_client.close()
    # then: the process buffers nothing for the channels that went
    assert set(layer.receive_buffer) <= buffers_before
    await held.disconnect()


# -- a full channel ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_event_a_full_channel_cannot_take_is_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    layer = RedisChannelLayer(hosts=[REDIS_URL], prefix="agenttest", capacity=1)
    group, channel = f"agent.test.{time.monotonic_ns()}", f"agenttest.{time.monotonic_ns()}"
    await layer.group_add(group, channel)
    full_before = losses["layer full"]
    with caplog.at_level(logging.WARNING, logger="agent.live.channel_layer"):
        await layer.group_send(group, {"type": "test.event", "n": 1})
        await layer.group_send(group, {"type": "test.event", "n": 2})
    assert losses["layer full"] == full_before + 1 and "full and lost an event" in caplog.text
    assert (await layer.receive(channel))["n"] == 1
    await layer.flush()
