"""How many live streams (websockets and HTTP event streams together) each user holds, across
every process and host, so one user cannot hold a server's sockets and threads.

A stream takes a slot as it opens (``take``) and gives it back as it ends (``StreamSlot.release``);
past ``MAX_STREAMS_PER_USER`` the next is refused (HTTP 429, socket close 4429). The slots live
in the channel layer's Redis: a sorted set per user, each member a stream, its score the moment
its lease runs out. A live stream renews its lease every third of ``STREAM_LEASE_S``; the slot of
a stream whose process died (or froze) is free once its lease runs out. Where the channel layer
has no Redis (the in-memory layer, one process), the slots are counted in this process.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections import defaultdict
from typing import Any

from channels.layers import get_channel_layer

from ..core.conf import agent_settings

_TAKE = """
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
    return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 1)
return 1
"""

_local: defaultdict[str, set[str]] = defaultdict(set)
"""This process's slots by user, where the channel layer has no Redis."""


class StreamSlot:
    """One stream's slot: renewed while its stream lives, given back when it ends."""

    def __init__(self, key: str, store: Any) -> None:
        self.key = key
        self.member = uuid.uuid4().hex
        self.store = store
        self.renewing: asyncio.Task[None] | None = None

    async def release(self) -> None:
        """Give the slot back; once is enough, again does nothing, and it never raises."""
        if self.renewing is not None and self.renewing is not asyncio.current_task():
            self.renewing.cancel()
        store, self.store, self.renewing = self.store, None, None
        if store is not None:
            try:
                await store.zrem(self.key, self.member)
            except Exception:  # noqa: BLE001  Redis away: the place comes free when its lease runs out
                pass
        held = _local.get(self.key)
        if held is not None:
            held.discard(self.member)
            if not held:
                del _local[self.key]

    async def _renew(self, owner: weakref.ref[Any]) -> None:
        """Renew the lease while the stream is there; a stream dropped without its ``release`` (a
        response never sent) gives its slot back here."""
        lease = agent_settings.STREAM_LEASE_S
        while owner() is not None:
            await asyncio.sleep(lease / 3)
            try:
                await self.store.zadd(self.key, {self.member: time.time() + lease})
                await self.store.expire(self.key, lease + 1)
            except Exception:  # noqa: BLE001  Redis away for a moment: the lease outlives one missed renewal
                pass
        await self.release()


async def take(user_id: Any, owner: object) -> StreamSlot | None:
    """A slot for ``owner``, a new stream of ``user_id``; None when the user holds ``MAX_STREAMS_PER_USER``."""
    layer = get_channel_layer()
    cap, lease = agent_settings.MAX_STREAMS_PER_USER, agent_settings.STREAM_LEASE_S
    key = f"{getattr(layer, 'prefix', 'asgi')}:agent:streams:{user_id}"
    if not hasattr(layer, "connection") or not hasattr(layer, "consistent_hash"):
        if len(_local[key]) >= cap:
            return None
        slot = StreamSlot(key, None)
        _local[key].add(slot.member)
        return slot
    store = layer.connection(layer.consistent_hash(key))
    slot = StreamSlot(key, store)
    if not await store.eval(_TAKE, 1, key, time.time(), cap, lease, slot.member):
        return None
    slot.renewing = asyncio.ensure_future(slot._renew(weakref.ref(owner)))
    return slot
