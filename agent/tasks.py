"""Celery tasks: thin wrappers around the parts. Their names are API."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="agent.run_turn", ignore_result=True, acks_late=False, max_retries=0)
def run_turn(turn_ref: str) -> None:
    """Run one turn. At most once: acknowledged early, never retried."""
    from .turns import runner

    runner.run(turn_ref)


@shared_task(name="agent.sweep_turns", ignore_result=True)
def sweep_turns() -> int:
    """End turns whose worker died; queue again turns the broker lost; fail files whose reading died."""
    from .attachments import lifecycle
    from .turns import monitor

    ended = monitor.sweep()  # first: a failure below must not hold up ending dead turns
    lifecycle.fail_stalled()
    return ended


@shared_task(name="agent.purge_chats", ignore_result=True)
def purge_chats() -> int:
    """Delete chats past ``RETENTION_DAYS`` and soft-deleted ones past ``PURGE_DELETED_DAYS``."""
    from .retention import purge

    return purge()


@shared_task(name="agent.process_attachment", ignore_result=True)
def process_attachment(attachment_id: str) -> None:
    """Read one uploaded file, once; bounded in time and memory by the extraction itself."""
    from .attachments import extraction

    extraction.process(attachment_id)


@shared_task(name="agent.purge_attachments", ignore_result=True)
def purge_attachments() -> int:
    """Remove files left unlinked for longer than ``UNLINKED_FILES_MAX_AGE_S`` (a day)."""
    from .attachments import lifecycle

    return lifecycle.purge_unlinked()
