"""The channel layer on Redis Sentinel: the same waiting pool as on one server, and events across a failover."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.layers import channel_layers

from agent.live.channel_layer import (
    MAX_CONNECTIONS,
    POOL_TIMEOUT_S,
    SOCKET_TIMEOUT_S,
    BlockingSentinelConnectionPool,
    RedisChannelLayer,
    redis_channel_layer,
)
from tests.support.redis_servers import MASTER_NAME, SentinelSet


def layer_on(entry: dict[str, Any]) -> RedisChannelLayer:
    return RedisChannelLayer(**entry["CONFIG"])


def test_a_sentinel_url_names_every_sentinel_the_master_and_the_database() -> None:
    (host,) = redis_channel_layer("redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2:26380/mymaster/3")["CONFIG"][
        "hosts"
    ]
    assert host["sentinels"] == [("10.0.0.1", 26379), ("10.0.0.2", 26380)]
    assert (host["master_name"], host["db"], host["password"]) == ("mymaster", 3, "s3cret")
    assert (host["socket_timeout"], host["max_connections"], host["timeout"]) == (
        SOCKET_TIMEOUT_S,
        MAX_CONNECTIONS,
        POOL_TIMEOUT_S,
    )


def test_sentinels_and_a_master_name_make_the_same_entry_as_the_url() -> None:
    by_url = redis_channel_layer("redis+sentinel://10.0.0.1:26379/mymaster/2")
    by_arguments = redis_channel_layer(sentinels=[("10.0.0.1", 26379)], master_name="mymaster", db=2)
    assert by_url == by_arguments


def test_a_list_of_urls_makes_shards_each_with_the_waiting_pool_and_timeout() -> None:
    hosts = redis_channel_layer(["redis://a.example:6379/0", "redis+sentinel://s.example:26379/m/0"])["CONFIG"]["hosts"]
    assert [host.get("address", host.get("master_name")) for host in hosts] == ["redis://a.example:6379/0", "m"]
    assert all(host["socket_timeout"] == SOCKET_TIMEOUT_S and host["timeout"] == POOL_TIMEOUT_S for host in hosts)


def test_a_sentinel_without_a_master_name_is_refused() -> None:
    with pytest.raises(ValueError):
        redis_channel_layer(sentinels=[("10.0.0.1", 26379)])
    with pytest.raises(ValueError):
        redis_channel_layer("redis+sentinel://10.0.0.1:26379")


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_a_burst_of_200_group_sends_over_sentinel_waits_for_connections_instead_of_failing(
    sentinel_set: SentinelSet,
) -> None:
    # given the layer on the sentinel's master, with a pool much smaller than the burst
    layer = layer_on(redis_channel_layer(sentinel_set.url, max_connections=8))
    group, channel = f"agent.burst.{time.monotonic_ns()}", await layer.new_channel()
    await layer.group_add(group, channel)
    assert isinstance(layer.connection(0).connection_pool, BlockingSentinelConnectionPool)
    # when 200 group sends go at once
    results = await asyncio.gather(
        *(layer.group_send(group, {"type": "burst", "n": n}) for n in range(200)), return_exceptions=True
    )
    # then none fails, and every event is there to receive
    assert [r for r in results if r is not None] == []
    received = {(await layer.receive(channel))["n"] for _ in range(200)}
    assert received == set(range(200))
    await layer.flush()


@pytest.mark.asyncio
@pytest.mark.timeout(90)
async def test_events_keep_flowing_after_a_sentinel_failover(sentinel_set: SentinelSet) -> None:
    # given a layer on the sentinel's master, with a member in a group
    layer = layer_on(redis_channel_layer(f"redis+sentinel://127.0.0.1:{sentinel_set.sentinel}/{MASTER_NAME}/0"))
    group, channel = f"agent.failover.{time.monotonic_ns()}", await layer.new_channel()
    await layer.group_add(group, channel)
    await layer.group_send(group, {"type": "before"})
    assert (await layer.receive(channel))["type"] == "before"
    # when the sentinel promotes the replica
    old = sentinel_set.master_port()
    new = await asyncio.to_thread(sentinel_set.fail_over)
    assert new != old
    # then the layer reaches the new master: the group survived and events flow (after a failed try or two)
    deadline = time.monotonic() + 30
    while True:
        try:
            await layer.group_send(group, {"type": "after"})
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    assert (await asyncio.wait_for(layer.receive(channel), 10))["type"] == "after"
    assert layer.connection(0).connection_pool.master_address == ("127.0.0.1", new)
    await layer.flush()
    channel_layers.backends.clear()
