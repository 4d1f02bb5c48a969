"""Every task of the app goes to the queue the site names: another site's workers on the broker never take one."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import redis
from django.conf import settings
from django.db import connection

from agent import tasks, turns
from agent.access import SessionRef
from agent.attachments.api import queue_processing
from agent.conversations import create_conversation
from agent.models import Turn
from agent.turns import monitor
from tests.support.factories import TurnFactory
from tests.support.model_server import ScriptedModelServer, answer
from tests.support.turns import agent_conf
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
OTHER_SITES_QUEUE = settings.CELERY_TASK_DEFAULT_QUEUE  # where a site that routes nothing sends everything


def broker() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def waiting(queue: str) -> list[str]:
    """The task names waiting in a queue of the broker (kombu keeps each queue as a Redis list of its name)."""
    import json

    return [json.loads(raw)["headers"]["task"] for raw in broker().lrange(queue, 0, -1)]


@pytest.fixture
def site_queue() -> Iterator[str]:
    """A queue of this test's own, named by the site as ``AGENT["TASK_QUEUE"]``."""
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-site-{uuid.uuid4().hex[:6]}"
    broker().delete(OTHER_SITES_QUEUE)
    with agent_conf(TASK_QUEUE=queue):
        yield queue
    broker().delete(queue, OTHER_SITES_QUEUE)


@pytest.mark.django_db
def test_every_task_goes_to_the_queue_the_site_names_whoever_sends_it(site_queue: str, chat: Any) -> None:
    # given a turn and a file to queue, by the tasks' stable names
    turn = TurnFactory(conversation=chat, user_id=chat.user_id, text="hi", deadline_at=chat.created_at)
    # when every kind of sender sends: the turn start, a part by name, beat and a delay() call
    monitor.queue(turn)
    queue_processing(uuid.uuid4())
    tasks.sweep_turns.apply_async()  # as beat sends a scheduled task
    tasks.purge_chats.delay()
    tasks.purge_attachments.apply_async(queue=OTHER_SITES_QUEUE)  # a caller's own queue still wins
    # then each is on the site's queue, none on the broker's default one but the one sent there
    assert sorted(waiting(site_queue)) == [
        "agent.process_attachment",
        "agent.purge_chats",
        "agent.run_turn",
        "agent.sweep_turns",
    ]
    assert waiting(OTHER_SITES_QUEUE) == ["agent.purge_attachments"]


def test_the_default_queue_is_agent() -> None:
    from agent.core.conf import AgentConf

    assert AgentConf().defaults()["TASK_QUEUE"] == "agent"


@pytest.fixture
def start_worker(django_db_setup: Any) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """``start_worker(queue)``: a solo worker of the test site in its own process, taking only ``queue``."""
    started: list[subprocess.Popen[bytes]] = []
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
    }

    def start(queue: str) -> subprocess.Popen[bytes]:
        node = f"queues-{uuid.uuid4().hex[:6]}@127.0.0.1"
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"{node}.log"
        argv = [sys.executable, "-m", "celery", "-A", "tests.celery_app", "worker", "-P", "solo", "-Q", queue]
        argv += ["-n", node, "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"]
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        started.append(process)
        wait_until(lambda: f"{node} ready." in log.read_text(errors="replace") or process.poll() is not None, 60)
        assert process.poll() is None, log.read_text(errors="replace")[-2000:]
        return process

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(150)
def test_a_worker_of_another_sites_queue_never_receives_this_sites_turn(
    start_worker: Callable[[str], subprocess.Popen[bytes]],
    site_queue: str,
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
) -> None:
    # given another site's worker on the same broker, taking the broker's default queue
    start_worker(OTHER_SITES_QUEUE)
    model_server.push(answer("the other site's answer"), answer("this site's answer"))
    # when this site starts a turn, and then the other site starts one of its own
    mine = turns.start(ref, chat.pk, "for this site", impersonated=False)
    other_chat = create_conversation(ref, {}, impersonated=False)
    with agent_conf(TASK_QUEUE=OTHER_SITES_QUEUE):
        theirs = turns.start(ref, other_chat.pk, "for the other site", impersonated=False)
    # then the other site's worker runs its own turn, sent after this site's, and never this site's
    wait_until(lambda: Turn.objects.get(pk=theirs.pk).status == Turn.Status.FINISHED, 60, "the other site's turn")
    assert Turn.objects.get(pk=mine.pk).status == Turn.Status.QUEUED
    assert waiting(site_queue) == ["agent.run_turn"]
    # and this site's own worker, taking its queue, runs it
    start_worker(site_queue)
    wait_until(lambda: Turn.objects.get(pk=mine.pk).status == Turn.Status.FINISHED, 60, "this site's turn")
    assert waiting(site_queue) == []
