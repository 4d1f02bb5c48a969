"""agent.E013: a channel layer or a Celery broker on a Redis Cluster node is refused, with a word on what to use."""

from __future__ import annotations

from typing import Any

from django.test import override_settings

from agent.checks.services import check_redis_is_not_a_cluster
from agent.live.channel_layer import redis_channel_layer
from tests.support.redis_servers import SentinelSet, Servers
from tests.support.waiting import free_port


def errors_for(url: str, **settings: Any) -> list[Any]:
    with override_settings(CHANNEL_LAYERS={"default": redis_channel_layer(url)}, **settings):
        return check_redis_is_not_a_cluster()


def test_e010_a_channel_layer_on_a_cluster_node(redis_servers: Servers) -> None:
    port = redis_servers.cluster_node()
    (error,) = errors_for(f"redis://:a-password@127.0.0.1:{port}/0")
    assert error.id == "agent.E013" and f"127.0.0.1:{port}" in error.msg and "Sentinel" in error.hint
    assert "a-password" not in error.msg + error.hint


def test_e010_a_celery_broker_on_a_cluster_node(redis_servers: Servers) -> None:
    port = redis_servers.cluster_node()
    plain = redis_servers.start()
    errors = errors_for(f"redis://127.0.0.1:{plain}/0", CELERY_BROKER_URL=f"redis://127.0.0.1:{port}/0")
    assert [(e.id, "Celery's broker" in e.msg) for e in errors] == [("agent.E013", True)]


def test_e010_is_quiet_for_one_server_and_for_sentinel(sentinel_set: SentinelSet) -> None:
    assert errors_for(f"redis://127.0.0.1:{sentinel_set.master}/0") == []
    assert errors_for(sentinel_set.url) == []


def test_e010_skips_quietly_a_server_it_cannot_reach() -> None:
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    assert errors_for(nobody, CELERY_BROKER_URL=nobody) == []


def test_e013_names_a_broker_once_when_the_celery_app_reads_it_from_the_settings(redis_servers: Servers) -> None:
    # given: the site's Celery app, made current, whose broker is the settings' own
    from tests.celery_app import app

    port = redis_servers.cluster_node()
    plain = redis_servers.start()
    app.set_current()
    broker, app.conf.broker_url = app.conf.broker_url, f"redis://127.0.0.1:{port}/0"
    try:
        errors = errors_for(f"redis://127.0.0.1:{plain}/0", CELERY_BROKER_URL=f"redis://127.0.0.1:{port}/0")
    finally:
        app.conf.broker_url = broker
    # then: one error for the one broker
    assert [e.id for e in errors] == ["agent.E013"]
