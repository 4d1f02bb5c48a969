"""A worker process killed with SIGKILL mid-turn: the sweep ends the turn and frees the chat."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest
from django.db import connection
from django.utils import timezone

from agent import turns
from agent.access import SessionRef
from agent.core.conf import agent_settings
from agent.models import AIRequest, Lock, Turn
from agent.turns import monitor
from tests.support.model_server import ScriptedModelServer, answer
from tests.support.turns import messages_of

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker_process(django_db_setup: Any) -> Iterator[subprocess.Popen[bytes]]:
    """``celery -A tests.celery_app worker`` in its own process, on the test database and this run's queue."""
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "AGENT_TEST_QUEUE": agent_settings.TASK_QUEUE,
    }
    from tests.celery_app import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(agent_settings.TASK_QUEUE)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.celery_app",
            "worker",
            "-P",
            "solo",
            "-c",
            "1",
            "-Q",
            agent_settings.TASK_QUEUE,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


def test_a_worker_killed_mid_turn_leaves_the_turn_to_the_sweep(
    worker_process: subprocess.Popen[bytes],
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
) -> None:
    # given: the worker is inside a slow model call
    model_server.push(answer("never delivered", delay=30))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    if not model_server.received.wait(30):
        worker_process.kill()
        raise AssertionError(worker_process.stderr.read().decode()[-2000:] if worker_process.stderr else "no worker")
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.RUNNING
    # when: it is killed, and its lease runs out
    worker_process.kill()
    worker_process.wait(timeout=10)
    assert monitor.sweep() == 0  # the lease is still live: not yet the sweep's to end
    Lock.objects.filter(holder=turn.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert monitor.sweep() == 1
    # then: the turn is interrupted, with its notice, and the chat takes a new turn
    row = Turn.objects.get(pk=turn.pk)
    assert (row.status, row.session_key) == ("interrupted", "")
    assert [(m.role, m.notice_code) for m in messages_of(chat)] == [("user", ""), ("notice", "interrupted")]
    assert not Lock.objects.filter(holder=turn.pk).exists()
    assert not AIRequest.objects.exists()  # the call never returned: nothing to journal, nothing stored twice
    assert turns.start(ref, chat.pk, "again", impersonated=False).status == Turn.Status.QUEUED
