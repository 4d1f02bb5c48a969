"""Fixtures of the several-hosts tests: Redis servers of a test's own."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.support.redis_servers import SentinelSet, Servers


@pytest.fixture
def redis_servers() -> Iterator[Servers]:
    servers = Servers()
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def sentinel_set(redis_servers: Servers) -> SentinelSet:
    return SentinelSet(redis_servers)
