"""The two hosts' S3 server and hosts, as the hosts tests drive them."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tests.support.harness import Process, Stack
from tests.support.redis_servers import SentinelSet

BUCKET = "agent-files"
SENTINEL_BROKER_DB = 1  # not the layer's 0: the test sees the broker land on the database its URL names


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


@dataclass
class Host:
    stack: Stack
    media_root: Path
    broker_options: dict[str, Any] = field(default_factory=dict)
    sentinel_set: SentinelSet | None = None  # the Redis behind Sentinel that the hosts share, if they do

    @property
    def queue(self) -> str:
        return self.stack.queue

    def log(self, name: str) -> str:
        return self.stack[name].output()

    @contextmanager
    def broker(self) -> Iterator[Any]:
        """A connection to the hosts' broker, with the transport options their settings give it."""
        from tests.celery_app import app

        with app.connection_for_write(self.stack.broker_url, transport_options=self.broker_options) as conn:
            yield conn

    def send_task(self, name: str) -> None:
        """Queue a task of the app for this host's worker, as beat would."""
        from tests.celery_app import app

        with self.broker() as conn:
            app.send_task(name, queue=self.queue, connection=conn)

    def purge_queue(self) -> None:
        with self.broker() as conn:
            conn.default_channel.queue_purge(self.queue)
