"""The channel layer a site runs the assistant's sockets on: Redis, set up so sockets live.

channels-redis waits for a process's events with a blocking Redis read of
``brpop_timeout`` (5 s). redis-py 8 gives every connection a 5 s socket
timeout by default, so that read is cut before Redis answers and daphne
drops every idle socket about 5.5 s after it opened. ``redis_channel_layer``
builds the whole ``CHANNEL_LAYERS["default"]`` entry with a socket timeout
well above the blocking read, whatever redis-py's default; ``agent.W001``
warns about a layer that would cut its own reads.

The same entry works on Redis Sentinel (a ``redis+sentinel://`` URL, or
``sentinels=`` and ``master_name=``) and on several shards (a list of URLs),
with the same waiting pool and timeouts on each. Redis Cluster is not one of
them: channels-redis does not speak it (``agent.E013`` says so).
"""

from __future__ import annotations

import inspect
import logging
import time
from typing import Any, Sequence
from urllib.parse import parse_qs, unquote, urlsplit

from channels_redis.core import BoundedQueue
from channels_redis.core import RedisChannelLayer as _ChannelsRedisLayer
from redis import asyncio as aioredis
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from ..core.events import losses

logger = logging.getLogger(__name__)

BACKEND = "agent.layers.RedisChannelLayer"

SOCKET_TIMEOUT_S = 2.0 * _ChannelsRedisLayer.brpop_timeout
"""Twice the blocking read: a reply that comes on time is never cut, a dead server still is."""

CAPACITY = 1_000
"""Events waiting per channel. A process's sockets share one channel in Redis: a burst
of one event for each of 100 chats, each with sockets in one process, is 100."""

EXPIRY_S = 60
"""An event a process has not read in a minute is dropped; its tabs resync."""

GROUP_EXPIRY_S = 3_600
"""A channel left in a group by a process that died leaves it within the hour;
live sockets refresh their groups well before that."""

MAX_CONNECTIONS = 64
"""Redis connections per process and event loop; more callers wait for one instead of failing."""

POOL_TIMEOUT_S = 10.0
"""How long a caller waits for a free connection before the pool refuses."""


SENTINEL_SCHEME = "redis+sentinel"


def redis_channel_layer(
    url: str | Sequence[str] | None = None,
    *,
    sentinels: Sequence[tuple[str, int]] | None = None,
    master_name: str | None = None,
    db: int = 0,
    password: str | None = None,
    socket_timeout: float = SOCKET_TIMEOUT_S,
    capacity: int = CAPACITY,
    expiry: int = EXPIRY_S,
    group_expiry: int = GROUP_EXPIRY_S,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout: float = POOL_TIMEOUT_S,
    **options: Any,
) -> dict[str, Any]:
    """The ``CHANNEL_LAYERS["default"]`` entry for the assistant on the Redis at ``url``.

    ``url`` is ``redis://host:port/db`` (or ``rediss://``), or
    ``redis+sentinel://[:password@]host:port,host:port/master_name/db`` for a
    master that Redis Sentinel names, or a list of either: shards, each
    channel and group on one of them. Instead of a URL, ``sentinels=[(host,
    port), ...]`` and ``master_name=`` (with ``db`` and ``password``) name a
    Sentinel master. ``options`` go to the layer (``prefix``,
    ``symmetric_encryption_keys``, ...).
    """
    connection = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": min(socket_timeout, float(_ChannelsRedisLayer.brpop_timeout)),
        "socket_keepalive": True,
        "health_check_interval": 30,
        "max_connections": max_connections,
        "timeout": pool_timeout,
    }
    if sentinels is not None or master_name is not None:
        if url is not None or not sentinels or not master_name:
            raise ValueError("Give either url, or both sentinels and master_name.")
        hosts = [_sentinel_host(list(sentinels), master_name, db, password, None, connection)]
    elif isinstance(url, str):
        hosts = [_host(url, connection)]
    elif url:
        hosts = [_host(shard, connection) for shard in url]
    else:
        raise ValueError("Give the Redis URL (or a list of them), or sentinels and master_name.")
    config = {
        "hosts": hosts,
        "capacity": capacity,
        "expiry": expiry,
        "group_expiry": group_expiry,
        **options,
    }
    return {"BACKEND": BACKEND, "CONFIG": config}


def _host(url: str, connection: dict[str, Any]) -> dict[str, Any]:
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        return {"address": url, **connection}
    credentials, _, netloc = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    path = [segment for segment in parts.path.split("/") if segment]
    if not netloc or not 1 <= len(path) <= 2:
        raise ValueError(f"A Sentinel URL is {SENTINEL_SCHEME}://host:port[,host:port...]/master_name[/db].")
    sentinels = []
    for address in netloc.split(","):
        host, _, port = address.rpartition(":")
        sentinels.append((host.strip("[]") or address, int(port) if host else 26379))
    query = parse_qs(parts.query)
    sentinel_password = query["sentinel_password"][-1] if "sentinel_password" in query else None
    entry = _sentinel_host(
        sentinels,
        unquote(path[0]),
        int(path[1]) if len(path) > 1 else 0,
        unquote(password) or None,
        sentinel_password,
        connection,
    )
    if username:
        entry["username"] = unquote(username)
    return entry


def _sentinel_host(
    sentinels: list[tuple[str, int]],
    master_name: str,
    db: int,
    password: str | None,
    sentinel_password: str | None,
    connection: dict[str, Any],
) -> dict[str, Any]:
    """A channels-redis host entry for a Sentinel master (its "sentinels" and "master_name" keys).

    A sentinel that does not take the connection within a second is passed over for the next one.
    """
    asking = {"socket_timeout": connection["socket_connect_timeout"], "socket_connect_timeout": 1.0}
    if sentinel_password:
        asking["password"] = sentinel_password
    host = {"sentinels": sentinels, "master_name": master_name, "db": db, "sentinel_kwargs": asking, **connection}
    if password:
        host["password"] = password
    return host


class RedisChannelLayer(_ChannelsRedisLayer):
    """channels-redis with a bounded, waiting connection pool and a cheaper, louder group send.

    The pool (``max_connections``, ``timeout`` in a host's options) makes a
    burst of group changes, such as a thousand sockets closing at once, wait
    for connections instead of failing with "Too many connections". A
    channel whose socket ended keeps no buffer (``forget_channel``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receive_buffer = LocalBuffers(self.capacity, horizon=2.0 * self.expiry)

    def forget_channel(self, channel: str) -> None:
        """Drop a channel whose socket ended, and every event that reaches it from now on."""
        self.receive_buffer.forget(channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """channels-redis's group send in two round trips instead of four, and loud when a channel is full.

        The members are read in one pipelined round trip, and each server gets
        one script that drops expired events and adds this one under capacity.
        A channel over capacity loses the event (as upstream); it is counted and
        logged, and its tabs find the hole by the next message's number.
        """
        assert self.require_valid_group_name(group), "Group name not valid"
        key = self._group_key(group)
        async with self.connection(self.consistent_hash(group)).pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
            pipe.zrange(key, 0, -1)
            _expired, members = await pipe.execute()
        channel_names = [member.decode("utf8") for member in members]
        by_connection, messages, capacities = self._map_channel_keys_to_connection(channel_names, message)
        for index, channel_keys in by_connection.items():
            args = [messages[k] for k in channel_keys] + [capacities[k] for k in channel_keys]
            full = await self.connection(index).eval(
                _GROUP_SEND, len(channel_keys), *channel_keys, *args, time.time(), int(self.expiry)
            )
            if full:
                losses["layer full"] += full
                logger.warning(
                    "agent: %d of %d channels of a group were full and lost an event; %d such in this process",
                    full,
                    len(channel_names),
                    losses["layer full"],
                )

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        if "address" in host:
            return aioredis.BlockingConnectionPool.from_url(host.pop("address"), **host)
        if "master_name" in host:
            master_name, sentinels = host.pop("master_name"), host.pop("sentinels")
            manager = Sentinel(sentinels, sentinel_kwargs=host.pop("sentinel_kwargs", None))
            # redis-py's Sentinel pool leaves its __init__ unannotated
            return BlockingSentinelConnectionPool(master_name, manager, **host)  # type: ignore[no-untyped-call]
        return super().create_pool(index)  # a host and port: channels-redis's own pool


class LocalBuffers(dict[str, BoundedQueue]):
    """channels-redis's buffers of a process's channels, by channel, kept for live channels only.

    Upstream's is a ``defaultdict``: an event read for a channel nobody reads
    any more (sent before its socket left its groups, or to a group it could
    not leave) makes a queue that stays, with the event, for the life of the
    process. After ``forget``, such an event is put in a queue kept nowhere.
    A forgotten channel is remembered for ``horizon`` seconds, longer than any
    event for it stays in Redis.
    """

    def __init__(self, capacity: int, *, horizon: float) -> None:
        super().__init__()
        self.capacity = capacity
        self.horizon = horizon
        self.ended: dict[str, float] = {}  # forgotten channel → when, oldest first

    def __missing__(self, channel: str) -> BoundedQueue:
        queue = BoundedQueue(self.capacity)
        if channel not in self.ended:
            self[channel] = queue
        return queue

    def __delitem__(self, channel: str) -> None:
        self.pop(channel, None)  # upstream deletes after a read that a forgotten channel never kept

    def forget(self, channel: str) -> None:
        now = time.monotonic()
        self.pop(channel, None)
        self.ended.pop(channel, None)
        self.ended[channel] = now
        while now - next(iter(self.ended.values())) > self.horizon:  # the one just forgotten stays
            del self.ended[next(iter(self.ended))]


class BlockingSentinelConnectionPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """Connections to the master Sentinel names, from a pool whose callers wait for a free one instead of failing.

    redis-py's Sentinel pool refuses a caller past ``max_connections`` with "Too
    many connections"; this one waits up to ``timeout`` seconds, as the plain
    entry's pool does. After a failover, connections reach the new master.
    """


_GROUP_SEND = """
local full = 0
local now = tonumber(ARGV[#ARGV - 1])
local expiry = tonumber(ARGV[#ARGV])
for i = 1, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, math.floor(now) - expiry)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + #KEYS]) then
        redis.call('ZADD', KEYS[i], now, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        full = full + 1
    end
end
return full
"""


def socket_timeout_of(host: Any) -> float | None:
    """The socket timeout a channels-redis host entry ends up with (None: no timeout).

    As redis-py decides it: a query-string value wins, then the entry's own,
    then the installed redis-py's default.
    """
    if isinstance(host, str):
        host = {"address": host}
    if not isinstance(host, dict):
        return redis_default_socket_timeout()
    address = host.get("address")
    if isinstance(address, str):
        query = parse_qs(urlsplit(address).query)
        if "socket_timeout" in query:
            return _as_seconds(query["socket_timeout"][-1])
    if "socket_timeout" in host:
        return _as_seconds(host["socket_timeout"])
    return redis_default_socket_timeout()


def redis_default_socket_timeout() -> float | None:
    """The socket timeout the installed redis-py gives a connection that names none."""
    for cls in aioredis.Connection.__mro__:
        parameter = inspect.signature(cls).parameters.get("socket_timeout")
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            default: float | None = parameter.default  # as redis-py declares it
            return default
    return None


def blocking_read_s(backend: type) -> float:
    """How long a layer's blocking read waits for an event."""
    return float(getattr(backend, "brpop_timeout", _ChannelsRedisLayer.brpop_timeout))


def cuts_blocking_read(timeout: float | None, backend: type = _ChannelsRedisLayer) -> bool:
    """Whether a socket timeout is too short for the layer's blocking read and its reply.

    A second of margin: a reply that comes a little late must still be read.
    """
    return timeout is not None and timeout < blocking_read_s(backend) + 1


def _as_seconds(value: Any) -> float | None:
    if value is None or value == "None":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
