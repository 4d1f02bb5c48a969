"""Two hosts with no folder in common: each a daphne and a prefork worker in a working directory of its own,
and a local S3 server (moto) that holds every file.

The processes are the fault suite's (``tests.faults.harness``), run with
``tests.hosts.settings``; the database and Redis are this run's
(``DATABASE_URL``, ``REDIS_URL``), so the same test runs through a pooler or
Sentinel when those variables point there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from django.conf import settings

from tests.faults.harness import Process, Stack, free_port, listening, run_artifacts

BUCKET = "agent-files"


@dataclass
class S3Server:
    endpoint_url: str
    process: Process

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="eu-north-1",
            aws_access_key_id="hosts-test",
            aws_secret_access_key="hosts-test-secret",
        )

    def keys(self) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=BUCKET)
        return sorted(item["Key"] for item in listed.get("Contents", []))


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
class Host:
    stack: Stack
    media_root: Path

    @property
    def queue(self) -> str:
        return self.stack.queue

    def log(self, name: str) -> str:
        return self.stack[name].output()


@pytest.fixture(scope="module")
def hosts(s3: S3Server, tmp_path_factory: pytest.TempPathFactory, django_db_setup: Any) -> Iterator[tuple[Host, Host]]:
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
            cwd=cwd,
            env={
                "AGENT_HOSTS_BUCKET": BUCKET,
                "AGENT_HOSTS_S3_ENDPOINT": s3.endpoint_url,
                "AGENT_HOSTS_MEDIA_ROOT": str(media_root),
                "AGENT_HOSTS_SENDS_TO": queues[other],
            },
        )
        made.append(Host(stack, media_root))
    try:
        for host in made:
            host.stack.purge_queue()  # an earlier run's tasks reach no worker of this one
            host.stack.start("daphne", "worker")
        yield made[0], made[1]
    finally:
        for host in made:
            host.stack.stop_all()
