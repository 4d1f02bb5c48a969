"""Celery tasks: thin wrappers around the parts. Their names are API.

Every task goes to the site's own queue, ``AGENT["TASK_QUEUE"]`` ("agent"),
whoever sends it (beat, ``delay()``, or the parts by name), so the workers of
another site on the same broker, listening on their own queue, never take one.
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from celery.signals import worker_process_shutdown

from .core import events
from .core.conf import agent_settings


class AgentTask(Task):
    """A task that goes to ``AGENT["TASK_QUEUE"]`` unless its caller names another queue.

    Read when each task is sent, never at import, so the setting is the sending process's own.
    """

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        options.setdefault("queue", agent_settings.TASK_QUEUE)
        return super().apply_async(args, kwargs, **options)


@worker_process_shutdown.connect
def send_what_is_left(**_kwargs: Any) -> None:
    """A worker's pool process may end without the interpreter's exit hooks: its last turns' events go out first."""
    events.flush()


@shared_task(base=AgentTask, name="agent.run_turn", ignore_result=True, acks_late=False, max_retries=0)
def run_turn(turn_ref: str) -> None:
    """Run one turn. At most once: acknowledged early, never retried."""
    from .turns import runner

    runner.run(turn_ref)


@shared_task(base=AgentTask, name="agent.sweep_turns", ignore_result=True)
def sweep_turns() -> int:
    """End turns whose worker died; queue again turns the broker lost; fail files whose reading died."""
    from .attachments import lifecycle
    from .turns import monitor

    ended = monitor.sweep()  # first: a failure below must not hold up ending dead turns
    lifecycle.fail_stalled()
    return ended


@shared_task(base=AgentTask, name="agent.purge_chats", ignore_result=True)
def purge_chats() -> int:
    """Delete chats past ``RETENTION_DAYS`` and soft-deleted ones past ``PURGE_DELETED_DAYS``."""
    from .retention import purge

    return purge()


@shared_task(base=AgentTask, name="agent.process_attachment", ignore_result=True)
def process_attachment(attachment_id: str) -> None:
    """Read one uploaded file, once; bounded in time and memory by the extraction itself."""
    from .attachments import extraction

    extraction.process(attachment_id)


@shared_task(base=AgentTask, name="agent.telegram_update", ignore_result=True, acks_late=False, max_retries=0)
def telegram_update(update_id: int) -> None:
    """Handle one update from Telegram, at most once (it may start a turn or run a card)."""
    from .telegram import updates

    updates.handle(update_id)


@shared_task(base=AgentTask, name="agent.telegram_deliver", ignore_result=True)
def telegram_deliver(turn_ref: str) -> None:
    """Send what a turn asked for in Telegram has stored since, in order."""
    from .telegram import delivery

    delivery.deliver(turn_ref)


@shared_task(base=AgentTask, name="agent.telegram_card", ignore_result=True)
def telegram_card(confirmation_id: str) -> None:
    """Edit a card shown in Telegram to its outcome, wherever it was decided."""
    from .telegram import delivery

    delivery.card_decided(confirmation_id)


@shared_task(base=AgentTask, name="agent.telegram_show_card", ignore_result=True)
def telegram_show_card(confirmation_id: str, link_id: int | None = None) -> None:
    """Show a card an MCP client's write made in the user's linked Telegram chats."""
    from .telegram import delivery

    delivery.show_everywhere(confirmation_id, link_id)


@shared_task(base=AgentTask, name="agent.purge_telegram", ignore_result=True)
def purge_telegram() -> int:
    """Forget handled Telegram updates, old link tokens and buttons nobody can press any more."""
    from .telegram import updates

    return updates.purge()


@shared_task(base=AgentTask, name="agent.purge_attachments", ignore_result=True)
def purge_attachments() -> int:
    """Remove files left unlinked for longer than ``UNLINKED_FILES_MAX_AGE_S`` (a day)."""
    from .attachments import lifecycle

    return lifecycle.purge_unlinked()
