"""A thread that waits gives its pooled database connection back: the next query takes one again."""

from __future__ import annotations

import threading
from typing import Any, Iterator

import pytest
from django.db import connection, connections, transaction

from agent.core import pooled


@pytest.fixture
def one_connection_pool(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    """An alias on the test database whose pool holds a single connection (a second taker waits, then fails).

    Outside a test case's transaction: the pool's connections are real sessions of their own."""
    alias = "pooled_once"
    options = {**connection.settings_dict.get("OPTIONS", {}), "pool": {"min_size": 1, "max_size": 1, "timeout": 2}}
    connections.settings[alias] = {**connection.settings_dict, "OPTIONS": options, "CONN_MAX_AGE": 0}
    with django_db_blocker.unblock():
        try:
            yield alias
        finally:
            connections[alias].close()
            connections[alias].close_pool()
            del connections[alias]
            del connections.settings[alias]


def in_thread(alias: str, give_back: bool) -> None:
    """A query on ``alias`` in a thread of its own that then waits (gives its connection back, or keeps it)."""
    done = threading.Event()

    def run() -> None:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1")
        if give_back:
            pooled.give_back()
        done.set()

    threading.Thread(target=run, daemon=True).start()  # the thread lives on, waiting, as a turn would
    assert done.wait(10)


def test_a_waiting_thread_gives_its_connection_back_to_the_pool(one_connection_pool: str) -> None:
    in_thread(one_connection_pool, give_back=True)
    with connections[one_connection_pool].cursor() as cursor:  # the pool's only connection is free again
        cursor.execute("SELECT 2")
        assert cursor.fetchone() == (2,)


def test_without_giving_it_back_the_pool_has_none_to_lend(one_connection_pool: str) -> None:
    in_thread(one_connection_pool, give_back=False)
    with pytest.raises(Exception) as refused:
        connections[one_connection_pool].ensure_connection()
    assert "PoolTimeout" in repr(refused.value.__cause__) or "couldn't get a connection" in str(refused.value)


def test_a_connection_inside_a_transaction_is_kept(one_connection_pool: str) -> None:
    with transaction.atomic(using=one_connection_pool):
        with connections[one_connection_pool].cursor() as cursor:
            cursor.execute("SELECT 1")
        pooled.give_back()
        assert connections[one_connection_pool].connection is not None


@pytest.mark.django_db
def test_without_a_pool_the_connection_stays() -> None:
    connection.ensure_connection()
    pooled.give_back()
    assert connection.connection is not None
