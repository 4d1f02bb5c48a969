"""A thread gives its database connection back to the pool before it waits on something else.

With Django's connection pool (``OPTIONS = {"pool": ...}``, which docs/operations.md recommends for
every process) a thread holds a server connection from its first query until the connection is
closed. A turn that kept it through the model's wait, or a heartbeat through its sleep, would need a
server connection per turn in flight; ``give_back()`` before such a wait returns it, and the next
query takes one from the pool again (no new session). Without a pool, or inside a transaction, it
leaves the connection as it is: a persistent connection stays, one of ``CONN_MAX_AGE = 0`` is closed
when its request or task ends, as before.
"""

from __future__ import annotations

from django.db import connections


def give_back() -> None:
    """Return this thread's pooled connections to their pools, unless a transaction holds them."""
    for connection in connections.all(initialized_only=True):
        pooled = connection.settings_dict.get("OPTIONS", {}).get("pool")
        if pooled and connection.connection is not None and not connection.in_atomic_block:
            connection.close()
