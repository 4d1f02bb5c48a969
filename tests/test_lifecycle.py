"""Life cycle and the tasks' stable names."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from agent.conversations import append_message
from agent.models import Conversation, Message
from agent.tasks import purge_chats, run_turn, sweep_turns
from tests.support.factories import AIRequestFactory, ConversationFactory, UserFactory

pytestmark = pytest.mark.django_db


def _aged(days: int, status: str = "active") -> Conversation:
    chat = ConversationFactory()
    append_message(chat.pk, role=Message.Role.USER, content="hello")
    old = timezone.now() - timedelta(days=days)
    Conversation.objects.filter(pk=chat.pk).update(last_message_at=old, updated_at=old, status=status)
    return chat


def test_task_names_are_api_and_turns_are_never_retried():
    assert run_turn.name == "agent.run_turn" and sweep_turns.name == "agent.sweep_turns"
    assert purge_chats.name == "agent.purge_chats"
    assert run_turn.max_retries == 0 and not run_turn.acks_late


def test_without_retention_only_long_deleted_chats_are_purged():
    kept_old, deleted_recently = _aged(400), _aged(5, status="deleted")
    purged = _aged(31, status="deleted")
    purge_chats()
    assert set(Conversation.objects.values_list("pk", flat=True)) == {kept_old.pk, deleted_recently.pk}
    assert not Message.objects.filter(conversation_id=purged.pk).exists()


@override_settings(AGENT={"RETENTION_DAYS": 90})
def test_retention_deletes_chats_whose_last_message_is_older():
    old, fresh = _aged(91), _aged(89)
    purge_chats()
    assert list(Conversation.objects.values_list("pk", flat=True)) == [fresh.pk]
    assert not Conversation.objects.filter(pk=old.pk).exists()


def test_deleting_a_user_deletes_their_chats_but_keeps_the_journal():
    user = UserFactory()
    chat = ConversationFactory(user=user)
    append_message(chat.pk, role=Message.Role.USER, content="hello")
    row = AIRequestFactory(user=user, status="success")
    user.delete()
    assert not Conversation.objects.filter(pk=chat.pk).exists()
    row.refresh_from_db()
    assert row.user_id is None


def test_purge_counts_chats_not_rows():
    _aged(31, status="deleted")
    assert purge_chats() == 1


def test_deleting_a_user_with_a_live_turn_leaves_no_lock_rows(ref, user, chat, endpoint):
    from agent import turns
    from agent.models import Lock

    turns.start(ref, chat.pk, "hello", impersonated=False)
    assert Lock.objects.count() == 2  # the chat's lock and the user's slot
    user.delete()
    assert not Lock.objects.exists()


def test_the_beat_schedule_runs_the_sweep_every_ten_seconds_and_the_purge_daily(settings):
    from tests.celery_app import app

    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["agent.sweep_turns"] == 10.0
    for purge in ("agent.purge_chats", "agent.purge_attachments"):  # nightly: once a day, at a fixed hour
        nightly = schedule[purge]
        assert len(nightly.hour) == len(nightly.minute) == 1 and len(nightly.day_of_week) == 7
    assert {"agent.sweep_turns", "agent.purge_chats"} <= set(app.tasks)
