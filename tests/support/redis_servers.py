"""Redis servers a test starts on free loopback ports and stops when it ends: a master with a replica and a
sentinel, or a Cluster node."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.waiting import free_port, wait_until

MASTER_NAME = "agentmaster"


class Servers:
    """``redis-server`` processes of one test, each on a free port, all killed by ``stop``."""

    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        self.directory = Path(tempfile.mkdtemp(prefix="agent-redis-ha-"))
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, *arguments: str, config: str = "", port: int = 0) -> int:
        port = port or free_port()
        argv = ["redis-server"]
        if config:
            path = self.directory / f"{port}.conf"
            path.write_text(config)
            argv.append(str(path))
        argv += ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.directory), "--dbfilename", f"{port}.rdb", *arguments]
        with open(self.directory / f"{port}.log", "wb") as log:
            self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        wait_until(lambda: _answers(port), 10, f"redis-server on port {port}")
        return port

    def cluster_node(self) -> int:
        """A Redis Cluster node with no slots yet: enough for ``INFO cluster`` to say ``cluster_enabled:1``.

        The node also listens on its port + 10000 for the cluster bus, so that port must be free too (a
        daphne of the browser tests once held it, and the node could not start)."""
        port = free_port()
        while port + 10_000 > 65_535 or not _free(port + 10_000):
            port = free_port()
        return self.start("--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf", port=port)

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def _free(port: int) -> bool:
    """Whether nothing listens on ``port`` of the loopback now."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(port: int) -> bool:
    try:
        with redis.Redis(port=port, socket_timeout=1) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


class SentinelSet:
    """A master, one replica of it, and a sentinel that fails over to the replica one second after the master
    stops answering (or when told to)."""

    def __init__(self, servers: Servers) -> None:
        self.master = servers.start()
        self.replica = servers.start("--replicaof", "127.0.0.1", str(self.master))
        config = (
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master} 1\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
        )
        self.sentinel = servers.start("--sentinel", config=config)
        wait_until(lambda: self._replica_in_sync(), 30, "the replica to sync and the sentinel to see it")

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel}/{MASTER_NAME}/0"

    def master_port(self) -> int:
        with redis.Redis(port=self.sentinel, socket_timeout=2) as client:
            return int(client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)[1])

    def _replica_in_sync(self) -> bool:
        with redis.Redis(port=self.replica, socket_timeout=2) as replica:
            if replica.info("replication").get("master_link_status") != "up":
                return False
        with redis.Redis(port=self.sentinel, socket_timeout=2) as sentinel:
            return bool(sentinel.execute_command("SENTINEL", "REPLICAS", MASTER_NAME))

    def fail_over(self) -> int:
        """Promote the replica (``SENTINEL FAILOVER``); the port of the new master once every side agrees
        (the old master follows it)."""
        before = self.master_port()
        with redis.Redis(port=self.sentinel, socket_timeout=2) as sentinel:
            sentinel.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
        wait_until(lambda: self.master_port() != before, 30, "the sentinel to name a new master")
        after = self.master_port()
        wait_until(lambda: _role(after) == "master", 30, "the new master to take writes")
        wait_until(lambda: _role(before) == "slave", 30, "the old master to follow the new one")
        return after


def _role(port: int) -> Any:
    with redis.Redis(port=port, socket_timeout=2) as client:
        return client.info("replication").get("role")
