"""The channel layer a site runs the assistant's sockets on: Redis, set up so sockets live (SPEC §14).

channels-redis waits for a process's events with a blocking Redis read of
``brpop_timeout`` (5 s). redis-py 8 gives every connection a 5 s socket
timeout by default, so that read is cut before Redis answers and daphne
drops every idle socket about 5.5 s after it opened. ``redis_channel_layer``
builds the whole ``CHANNEL_LAYERS["default"]`` entry with a socket timeout
well above the blocking read, whatever redis-py's default; ``agent.W001``
warns about a layer that would cut its own reads.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
from typing import Any
from urllib.parse import parse_qs, urlsplit

from channels_redis.core import RedisChannelLayer as _ChannelsRedisLayer
from redis import asyncio as aioredis

from .events import FELL_BEHIND

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

SOCKET_BACKLOG = 100
"""Events buffered in the process for one socket; past that the oldest go and the socket resyncs."""


def redis_channel_layer(
    url: str,
    *,
    socket_timeout: float = SOCKET_TIMEOUT_S,
    capacity: int = CAPACITY,
    expiry: int = EXPIRY_S,
    group_expiry: int = GROUP_EXPIRY_S,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout: float = POOL_TIMEOUT_S,
    socket_backlog: int = SOCKET_BACKLOG,
    **options: Any,
) -> dict[str, Any]:
    """The ``CHANNEL_LAYERS["default"]`` entry for the assistant on the Redis at ``url``.

    ``options`` go to the layer (``prefix``, ``symmetric_encryption_keys``, ...).
    """
    host = {
        "address": url,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": min(socket_timeout, float(_ChannelsRedisLayer.brpop_timeout)),
        "socket_keepalive": True,
        "health_check_interval": 30,
        "max_connections": max_connections,
        "timeout": pool_timeout,
    }
    config = {
        "hosts": [host],
        "capacity": capacity,
        "expiry": expiry,
        "group_expiry": group_expiry,
        "socket_backlog": socket_backlog,
        **options,
    }
    return {"BACKEND": BACKEND, "CONFIG": config}


class SocketBuffer(asyncio.Queue):  # type: ignore[type-arg]
    """One socket's events waiting in this process, bounded.

    When full, the oldest event goes (as channels-redis does) and the socket's
    next read is a ``FELL_BEHIND`` event instead, so it can resync rather than
    show a chat with a hole in it.
    """

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.dropped = 0

    def put_nowait(self, item: Any) -> None:
        if self.full():
            super().get_nowait()
            self.dropped += 1
        super().put_nowait(item)

    def get_nowait(self) -> Any:
        if self.dropped:
            dropped, self.dropped = self.dropped, 0
            return {"type": FELL_BEHIND, "dropped": dropped}
        return super().get_nowait()


class RedisChannelLayer(_ChannelsRedisLayer):
    """channels-redis with a bounded, waiting connection pool and sockets told when they fall behind.

    The pool (``max_connections``, ``timeout`` in a host's options) makes a
    burst of group changes, such as a thousand sockets closing at once, wait
    for connections instead of failing with "Too many connections".
    """

    def __init__(self, *args: Any, socket_backlog: int = SOCKET_BACKLOG, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receive_buffer = collections.defaultdict(functools.partial(SocketBuffer, socket_backlog))

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        if "address" not in host:
            return super().create_pool(index)  # sentinels, or a host and port: channels-redis's own pool
        return aioredis.BlockingConnectionPool.from_url(host.pop("address"), **host)


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
        parameter = inspect.signature(cls.__init__).parameters.get("socket_timeout")
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return parameter.default
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
