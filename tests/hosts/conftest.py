"""Two hosts with no folder in common: each a daphne and a prefork worker in a working directory of its own,
and a local S3 server (moto) that holds every file.

The processes are the fault suite's (``tests.support.harness``), run with
``tests.hosts.settings``; the database is this run's (``DATABASE_URL``), so the
same test runs through a pooler when it points there. The hosts run twice: on
this run's Redis (``REDIS_URL``, ``CELERY_BROKER_URL``), then on a master, a
replica and a sentinel of the test's own, with the channel layer and the
broker set as the docs tell a site behind Sentinel to.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest
from django.conf import settings

from tests.support.harness import Process, Stack, listening, run_artifacts
from tests.support.hosts import BUCKET, SENTINEL_BROKER_DB, Host, S3Server
from tests.support.redis_servers import MASTER_NAME, SentinelSet, Servers
from tests.support.waiting import free_port


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto in server mode on a free loopback port, with the bucket made; killed with its process group."""
    port = free_port()
    directory = run_artifacts() / "hosts"
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = Process(
        "moto",
        argv,
        {"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"},
        directory / "moto.log",
        lambda p: listening(port),
        tmp_path_factory.mktemp("moto"),
    )
    process.start().wait_ready()
    server = S3Server(f"http://127.0.0.1:{port}", process)
    try:
        server.client().create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-north-1"})
        yield server
    finally:
        process.kill()


@dataclass
class Redis:
    """Where the hosts' channel layer and broker are, and the settings that reach them."""

    layer_url: str | None = None
    broker_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    broker_options: dict[str, Any] = field(default_factory=dict)
    sentinel_set: SentinelSet | None = None


@pytest.fixture(scope="module", params=["redis", "sentinel"])
def redis_of_hosts(request: pytest.FixtureRequest) -> Iterator[Redis]:
    """This run's Redis, or a master with a replica behind a sentinel, named as a site on several hosts names
    them: the layer by ``redis+sentinel://``, the broker by a list of ``sentinel://`` URLs (the last one down)
    and its master's name in the transport options."""
    if request.param == "redis":
        yield Redis()
        return
    servers = Servers()
    try:
        sentinel_set = SentinelSet(servers)
        down = free_port()  # a sentinel that no longer answers
        yield Redis(
            layer_url=sentinel_set.url,
            broker_url=";".join(
                f"sentinel://127.0.0.1:{port}/{SENTINEL_BROKER_DB}" for port in (sentinel_set.sentinel, down)
            ),
            env={"AGENT_HOSTS_BROKER_MASTER": MASTER_NAME},
            broker_options={"master_name": MASTER_NAME},
            sentinel_set=sentinel_set,
        )
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def hosts(
    s3: S3Server, redis_of_hosts: Redis, tmp_path_factory: pytest.TempPathFactory, django_db_setup: Any
) -> Iterator[tuple[Host, Host]]:
    """Hosts A and B; each one's daphne queues its tasks for the other one's worker."""
    base = settings.CELERY_TASK_DEFAULT_QUEUE
    queues = {"a": f"{base}-host-a", "b": f"{base}-host-b"}
    made = []
    for name, other in (("a", "b"), ("b", "a")):
        cwd = tmp_path_factory.mktemp(f"host-{name}")
        media_root = cwd / "media"
        stack = Stack(
            f"hosts-{name}",
            settings_module="tests.hosts.settings",
            queue=queues[name],
            redis_url=redis_of_hosts.layer_url,
            broker_url=redis_of_hosts.broker_url,
            cwd=cwd,
            env={
                "AGENT_HOSTS_BUCKET": BUCKET,
                "AGENT_HOSTS_S3_ENDPOINT": s3.endpoint_url,
                "AGENT_HOSTS_MEDIA_ROOT": str(media_root),
                "AGENT_HOSTS_SENDS_TO": queues[other],
                **redis_of_hosts.env,
            },
        )
        made.append(Host(stack, media_root, redis_of_hosts.broker_options, redis_of_hosts.sentinel_set))
    try:
        for host in made:
            host.purge_queue()  # an earlier run's tasks reach no worker of this one
            host.stack.start("daphne", "worker")
        yield made[0], made[1]
    finally:
        for host in made:
            host.stack.stop_all()
