"""What ``agent.live.channel_layer`` builds on inside channels-redis, checked against the installed release.

The layer replaces upstream's receive buffers, sends to a group with a script of its own
that writes upstream's per-channel sorted sets, and makes its own connection pools; each
of these reads upstream code that is not its public API. A release that moves any of it
fails here, saying what moved, instead of losing events silently.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from importlib.metadata import version

import pytest
import redis
from channels_redis.core import BoundedQueue
from channels_redis.core import RedisChannelLayer as Upstream
from django.conf import settings

from agent.live.channel_layer import RedisChannelLayer

UPSTREAM = f"channels-redis {version('channels-redis')}"
REDIS_URL = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"]

CALLED = {  # what agent.live.channel_layer calls or overrides on upstream's layer, with the parameters it passes
    "connection": ["index"],
    "consistent_hash": ["value"],
    "create_pool": ["index"],
    "_group_key": ["group"],
    "_map_channel_keys_to_connection": ["channel_names", "message"],
    "require_valid_group_name": ["name"],
}
ATTRIBUTES = ("capacity", "expiry", "group_expiry", "hosts", "receive_buffer")


def test_the_methods_the_layer_calls_take_the_parameters_it_passes() -> None:
    for name, parameters in CALLED.items():
        method = getattr(Upstream, name, None)
        assert callable(method), f"{UPSTREAM}: RedisChannelLayer.{name}, which agent.live.channel_layer calls, is gone"
        found = [p for p in inspect.signature(method).parameters if p != "self"]
        assert found == parameters, f"{UPSTREAM}: RedisChannelLayer.{name} now takes {found}, not {parameters}"


def test_the_attributes_the_layer_reads_are_set_by_upstreams_constructor() -> None:
    layer = Upstream(hosts=[REDIS_URL])
    missing = [name for name in ATTRIBUTES if not hasattr(layer, name)]
    assert not missing, (
        f"{UPSTREAM}: RedisChannelLayer() no longer sets {missing}, which agent.live.channel_layer reads"
    )
    assert isinstance(layer.hosts, list) and isinstance(layer.hosts[0], dict), f"{UPSTREAM}: hosts changed shape"


def test_upstreams_receive_reads_and_drops_buffers_as_the_layers_own_buffers_expect() -> None:
    # the app's LocalBuffers stands in for upstream's defaultdict: it must be read by key and deleted by key
    source = inspect.getsource(Upstream.receive)
    assert "self.receive_buffer[" in source and "del self.receive_buffer[" in source, (
        f"{UPSTREAM}: RedisChannelLayer.receive no longer reads receive_buffer by channel and deletes it after"
    )
    queue = BoundedQueue(2)
    assert isinstance(queue, asyncio.Queue) and queue.maxsize == 2, f"{UPSTREAM}: BoundedQueue(capacity) changed"


@pytest.mark.asyncio
async def test_a_channels_events_are_a_sorted_set_scored_by_time_as_the_group_send_script_writes() -> None:
    # given upstream's own send to a channel
    layer = Upstream(hosts=[REDIS_URL], prefix=f"agent-shape-{time.monotonic_ns()}")
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "probe"})
    by_connection, messages, capacities = layer._map_channel_keys_to_connection([channel], {"type": "probe"})
    (key,) = messages
    client = redis.Redis.from_url(REDIS_URL)
    try:
        # then the channel's key is where the group send script writes, a sorted set scored by the send's time
        assert list(by_connection) == [0] and by_connection[0] == [key] and isinstance(capacities[key], int)
        assert client.type(key) == b"zset", f"{UPSTREAM}: a channel's events are no longer a sorted set"
        ((_member, score),) = client.zrange(key, 0, -1, withscores=True)
        assert abs(score - time.time()) < 60, f"{UPSTREAM}: a channel's events are no longer scored by time"
        # and upstream reads back what the layer's script would have written
        assert (await layer.receive(channel))["type"] == "probe"
    finally:
        client.delete(key)
        client.close()
        await layer.flush()


def test_the_layer_is_upstreams_with_its_own_buffers() -> None:
    layer = RedisChannelLayer(hosts=[REDIS_URL])
    assert isinstance(layer, Upstream) and type(layer.receive_buffer).__name__ == "LocalBuffers"
