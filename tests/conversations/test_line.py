"""The active line as messages are stored: one line, even with writers at once."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from agent.conversations import append_message
from agent.models import Conversation, Message

pytestmark = pytest.mark.django_db(transaction=True)


def test_writers_at_once_still_make_one_line(chat: Conversation) -> None:
    # given four writers that store messages in one chat at the same moments
    barrier = threading.Barrier(4)
    failures: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(5):
                barrier.wait(timeout=10)
                append_message(chat.pk, role=Message.Role.NOTICE, notice_code="stopped")
        except BaseException as failure:  # noqa: BLE001  (reported below)
            failures.append(failure)
            barrier.abort()  # the others stop waiting for this one
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # then every message follows the one stored before it, and the chat's line ends at the last
    assert failures == []
    rows = list(Message.objects.filter(conversation=chat).order_by("seq").values_list("pk", "parent_id"))
    assert len(rows) == 20
    assert [parent for _pk, parent in rows] == [None] + [pk for pk, _parent in rows[:-1]]
    chat.refresh_from_db()
    assert chat.line_end == rows[-1][0] and chat.message_count == 20
