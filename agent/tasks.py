"""Celery tasks: thin wrappers around the parts. Their names are API."""
from __future__ import annotations

from typing import Any

from celery import shared_task

from .conf import agent_settings


@shared_task(name="agent.run_turn", ignore_result=True, acks_late=False, max_retries=0)
def run_turn(turn_ref: str) -> None:
    """Run one turn. At most once: acknowledged early, never retried."""
    from .turns import runner

    runner.run(turn_ref)


@shared_task(name="agent.sweep_turns", ignore_result=True)
def sweep_turns() -> int:
    """End turns whose worker died; queue again turns the broker lost."""
    from .turns import monitor

    return monitor.sweep()


@shared_task(name="agent.purge_chats", ignore_result=True)
def purge_chats() -> int:
    """Delete chats past ``RETENTION_DAYS`` and soft-deleted ones past ``PURGE_DELETED_DAYS``."""
    from .retention import purge

    return purge()


def queue_turn(turn: Any) -> None:
    """Send the turn's ref to a worker, with the deadline as Celery's soft time limit."""
    soft = agent_settings.TURN_DEADLINE_S + agent_settings.STOP_GRACE_S
    run_turn.apply_async((str(turn.pk),), soft_time_limit=soft, time_limit=soft + agent_settings.STOP_GRACE_S)
