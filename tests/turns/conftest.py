"""Helpers for the turn loop: chats, tools declared by a test, settings overrides, waiting, a Celery worker."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from agent.models import Message, Turn


def agent_conf(**changes: Any) -> override_settings:
    """``override_settings`` for some keys of ``AGENT``, keeping the test settings' others."""
    return override_settings(AGENT={**settings.AGENT, **changes})


def messages_of(chat: Any) -> list[Message]:
    """The chat's full rows, oldest first (what the runner stored, not what a client sees)."""
    return list(Message.objects.filter(conversation_id=getattr(chat, "pk", chat)).order_by("seq"))


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool`` entries of one request body the model received."""
    return [m for m in request["messages"] if m.get("role") == "tool"]


def tool_names(request: dict[str, Any]) -> list[str]:
    """The names of the tools a request showed the model."""
    return [t["function"]["name"] for t in request.get("tools") or []]


def wait_until(condition: Callable[[], Any], timeout: float = 10, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def wait_ended(turn: Turn, timeout: float = 15) -> Turn:
    """The turn's row once it is no longer queued or running."""
    wait_until(
        lambda: Turn.objects.filter(pk=turn.pk).exclude(status__in=Turn.LIVE).exists(), timeout, "the turn to end"
    )
    return Turn.objects.get(pk=turn.pk)


@pytest.fixture
def counter(declare: Callable[..., Any]) -> list[dict[str, Any]]:
    """A read tool ``count_me`` (no permission needed) that records each run."""
    runs: list[dict[str, Any]] = []

    def count_me(ctx: Any, **args: Any) -> dict[str, Any]:
        runs.append(args)
        return {"count": len(runs)}

    declare(count_me, name="count_me", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    return runs


@pytest.fixture(scope="module")
def worker(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Any]:
    """A Celery worker (two threads) on the test queue, for one module's tests."""
    from celery.contrib.testing.worker import start_worker

    from tests.celery_app import app

    with django_db_blocker.unblock():
        with app.connection_for_write() as conn:  # turns queued by earlier tests, for rows long gone
            conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)
        with start_worker(
            app,
            pool="threads",
            concurrency=2,
            perform_ping_check=False,
            queues=[settings.CELERY_TASK_DEFAULT_QUEUE],
            loglevel="WARNING",
            shutdown_timeout=10,
        ) as started:
            yield started
