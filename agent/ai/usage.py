"""Usage sinks: each journal row, handed synchronously to every sink, each isolated."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Callable, Iterator

from django.utils.module_loading import import_string

from ..core.conf import agent_settings
from ..core.ids import MessageId
from ..models import AIRequest, Message

logger = logging.getLogger(__name__)
_local = threading.local()


@contextlib.contextmanager
def stored_by_caller(message_id: MessageId) -> Iterator[None]:
    """The caller will store the message under ``message_id`` with its row itself.

    So the agent's sink spares the UPDATE that could not find that message yet.
    """
    _local.message_id = str(message_id)
    try:
        yield
    finally:
        _local.message_id = None


def deliver(row: AIRequest) -> None:
    """Hand a row to the agent's own sink, then to ``AGENT["USAGE_SINKS"]``.

    A refused row reaches no sink. A sink's exception is logged, never raised.
    """
    if row.status == AIRequest.Status.REFUSED:
        return
    sinks: list[Callable[[AIRequest], Any]] = [link_to_message]
    for path in agent_settings.USAGE_SINKS:
        try:
            sinks.append(import_string(path))
        except ImportError:
            logger.exception("agent: usage sink %s cannot be imported", path)
    for sink in sinks:
        try:
            sink(row)
        except Exception:
            logger.exception("agent: usage sink %s failed", getattr(sink, "__name__", sink))


def link_to_message(row: AIRequest) -> None:
    """The agent's sink: a message already stored under the row's attribution gets the row.

    The answer of the running turn is stored with its row by the runner; this
    covers a message stored elsewhere, and only one of the row's own user
    that has no row yet.
    """
    message_id = (row.attribution or {}).get("message")
    if not message_id or row.user_id is None or message_id == getattr(_local, "message_id", None):
        return
    Message.objects.filter(pk=message_id, conversation__user_id=row.user_id, ai_request__isnull=True).update(
        ai_request=row
    )
