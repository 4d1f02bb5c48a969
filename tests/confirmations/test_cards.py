"""Cards: a write runs only on its user's click, with everything still holding."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.utils import timezone

from agent import confirmations
from agent.conversations import delete_conversation
from agent.core.errors import Expired, Forbidden, Impersonated, NotFound, NotWaiting, SessionGone
from agent.core.events import topic
from agent.models import Confirmation, Message
from agent.tools import registry
from tests.notes.models import Note
from tests.support.factories import ConversationFactory, UserSettingsFactory
from tests.support.sessions import login

Status = Confirmation.Status


def notices_of(confirmation: Confirmation) -> list[tuple[str, dict[str, Any]]]:
    return list(
        Message.objects.filter(role=Message.Role.NOTICE, confirmation=confirmation).values_list(
            "notice_code", "notice_params"
        )
    )


def status_of(confirmation: Confirmation) -> str:
    return Confirmation.objects.get(pk=confirmation.pk).status


def lapse(confirmation: Confirmation) -> None:
    Confirmation.objects.filter(pk=confirmation.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def revoke(user: Any, codename: str) -> None:
    user.user_permissions.remove(Permission.objects.get(content_type__app_label="notes", codename=codename))


# -- outcomes -------------------------------------------------------------------


def test_confirm_runs_the_write_and_marks_the_card_done(ref, user, propose):
    confirmation = propose("notes_create", {"title": "Buy milk", "body": "2 litres"})

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert decided.status == Status.DONE and decided.decided_at is not None
    assert status_of(confirmation) == Status.DONE
    assert list(Note.objects.values_list("owner", "title", "body")) == [(user.pk, "Buy milk", "2 litres")]
    assert notices_of(confirmation) == [("confirmation_done", {"tool": "notes_create"})]


def test_confirm_accepts_the_id_as_a_string(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})

    assert confirmations.confirm(ref, str(confirmation.pk), impersonated=False).status == Status.DONE


def test_cancel_marks_the_card_cancelled_and_changes_nothing(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})

    decided = confirmations.cancel(ref, confirmation.pk, impersonated=False)

    assert decided.status == Status.CANCELLED == status_of(confirmation)
    assert not Note.objects.exists()
    assert notices_of(confirmation) == [("confirmation_cancelled", {"tool": "notes_create"})]


def test_an_expired_card_is_refused_and_settled_as_expired(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    lapse(confirmation)

    with pytest.raises(Expired):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert status_of(confirmation) == Status.EXPIRED
    assert not Note.objects.exists()
    assert notices_of(confirmation) == [("confirmation_expired", {"tool": "notes_create"})]


def test_cancelling_an_expired_card_is_expired_too(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    lapse(confirmation)

    with pytest.raises(Expired):
        confirmations.cancel(ref, confirmation.pk, impersonated=False)

    assert status_of(confirmation) == Status.EXPIRED


def test_data_changed_since_the_preview_is_stale_and_nothing_is_written(ref, user, propose):
    note = Note.objects.create(owner=user, title="Shopping", body="milk")
    confirmation = propose("notes_update", {"note_id": note.pk, "body": "milk, bread"})
    Note.objects.filter(pk=note.pk).update(body="eggs")

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert decided.status == Status.STALE == status_of(confirmation)
    assert Note.objects.get(pk=note.pk).body == "eggs"
    assert notices_of(confirmation) == [("confirmation_stale", {"tool": "notes_update"})]


def test_unchanged_data_lets_the_update_run(ref, user, propose):
    note = Note.objects.create(owner=user, title="Shopping", body="milk")
    confirmation = propose("notes_update", {"note_id": note.pk, "body": "milk, bread"})

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE
    assert Note.objects.get(pk=note.pk).body == "milk, bread"


def test_an_update_of_another_users_note_fails_and_changes_nothing(ref, propose, make_user):
    theirs = Note.objects.create(owner=make_user(), title="Theirs", body="keep me")
    confirmation = propose("notes_update", {"note_id": theirs.pk, "body": "overwritten"})

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert decided.status == Status.FAILED
    assert Note.objects.get(pk=theirs.pk).body == "keep me"
    assert "keep me" not in repr(confirmation.preview)


def test_a_write_that_raises_fails_with_its_class_name_only_and_is_rolled_back(ref, user, propose, declare):
    def half_write(ctx: Any, title: str) -> None:
        Note.objects.create(owner=ctx.user, title=title)
        raise RuntimeError("customer 4711 owes 99 EUR")

    declare(
        half_write,
        name="t_half_write",
        kind="write",
        module="notes",
        parameters={"type": "object", "properties": {"title": {"type": "string"}}},
        preview=lambda ctx, title: {"title": title},
    )
    confirmation = propose("t_half_write", {"title": "Half"})

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    stored = Confirmation.objects.get(pk=confirmation.pk)
    assert decided.status == Status.FAILED == stored.status
    assert decided.outcome == "RuntimeError" == stored.outcome
    assert not Note.objects.exists()
    assert notices_of(confirmation) == [("confirmation_failed", {"tool": "t_half_write"})]


def test_a_permission_lost_before_the_click_fails_without_writing(ref, user, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    revoke(user, "add_note")

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert decided.status == Status.FAILED == status_of(confirmation)
    assert not Note.objects.exists()
    assert notices_of(confirmation) == [("confirmation_failed", {"tool": "notes_create"})]


def test_a_module_that_no_longer_lets_sessions_write_fails_without_writing(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})

    with override_settings(AGENT={**settings.AGENT, "SESSION_WRITE_MODULES": []}):
        decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert decided.status == Status.FAILED == status_of(confirmation)
    assert not Note.objects.exists()


def test_a_tool_removed_before_the_click_fails(ref, propose, declare):
    declare(lambda ctx: None, name="t_removed", kind="write", module="notes", preview=lambda ctx: {})
    confirmation = propose("t_removed", {})
    registry.unregister("t_removed")

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.FAILED


# -- refusals -------------------------------------------------------------------


@pytest.mark.parametrize("action", [confirmations.confirm, confirmations.cancel])
def test_another_users_card_is_not_found(propose, make_user, action):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    _client, other_ref = login(make_user("notes.add_note"))

    with pytest.raises(NotFound):
        action(other_ref, confirmation.pk, impersonated=False)

    assert status_of(confirmation) == Status.WAITING
    assert not Note.objects.exists() and notices_of(confirmation) == []


@pytest.mark.parametrize("card_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000", None, 7])
def test_a_missing_or_malformed_card_is_not_found(ref, card_id):
    with pytest.raises(NotFound):
        confirmations.confirm(ref, card_id, impersonated=False)


def test_a_card_of_a_deleted_chat_is_not_found(ref, chat, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    delete_conversation(ref, chat.pk, impersonated=False)

    with pytest.raises(NotFound):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert not Note.objects.exists()


@pytest.mark.parametrize("action", [confirmations.confirm, confirmations.cancel])
def test_an_impersonated_click_is_refused(ref, propose, action):
    confirmation = propose("notes_create", {"title": "Buy milk"})

    with pytest.raises(Impersonated):
        action(ref, confirmation.pk, impersonated=True)

    assert status_of(confirmation) == Status.WAITING and not Note.objects.exists()


def test_a_switched_off_assistant_refuses_the_click(ref, user, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    UserSettingsFactory(user=user, enabled=False)

    with pytest.raises(Forbidden):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert status_of(confirmation) == Status.WAITING and not Note.objects.exists()


def test_impersonated_has_no_default(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})

    with pytest.raises(TypeError):
        confirmations.confirm(ref, confirmation.pk)  # type: ignore[call-arg]

    assert status_of(confirmation) == Status.WAITING


@pytest.mark.parametrize("action", [confirmations.confirm, confirmations.cancel])
def test_a_click_after_logout_is_session_gone(session, propose, action):
    client, ref = session
    confirmation = propose("notes_create", {"title": "Buy milk"})
    client.logout()

    with pytest.raises(SessionGone):
        action(ref, confirmation.pk, impersonated=False)

    assert status_of(confirmation) == Status.WAITING and not Note.objects.exists()


def test_confirming_a_done_card_again_is_not_waiting_and_writes_once(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    confirmations.confirm(ref, confirmation.pk, impersonated=False)

    with pytest.raises(NotWaiting):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)
    with pytest.raises(NotWaiting):
        confirmations.cancel(ref, confirmation.pk, impersonated=False)

    assert Note.objects.count() == 1
    assert len(notices_of(confirmation)) == 1


def test_confirming_a_cancelled_card_is_not_waiting(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    confirmations.cancel(ref, confirmation.pk, impersonated=False)

    with pytest.raises(NotWaiting):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert status_of(confirmation) == Status.CANCELLED and not Note.objects.exists()


def test_confirming_an_expired_card_a_second_time_is_not_waiting(ref, propose):
    confirmation = propose("notes_create", {"title": "Buy milk"})
    lapse(confirmation)
    with pytest.raises(Expired):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)

    with pytest.raises(NotWaiting):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert len(notices_of(confirmation)) == 1


# -- every outcome: a notice, broadcast after commit ----------------------------


def _done(ref: Any, confirmation: Confirmation, user: Any) -> None:
    confirmations.confirm(ref, confirmation.pk, impersonated=False)


def _cancelled(ref: Any, confirmation: Confirmation, user: Any) -> None:
    confirmations.cancel(ref, confirmation.pk, impersonated=False)


def _expired(ref: Any, confirmation: Confirmation, user: Any) -> None:
    lapse(confirmation)
    with pytest.raises(Expired):
        confirmations.confirm(ref, confirmation.pk, impersonated=False)


def _stale(ref: Any, confirmation: Confirmation, user: Any) -> None:
    Note.objects.filter(pk=confirmation.arguments["note_id"]).update(body="changed meanwhile")
    confirmations.confirm(ref, confirmation.pk, impersonated=False)


def _failed(ref: Any, confirmation: Confirmation, user: Any) -> None:
    revoke(user, "change_note")
    confirmations.confirm(ref, confirmation.pk, impersonated=False)


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (_done, Status.DONE),
        (_cancelled, Status.CANCELLED),
        (_expired, Status.EXPIRED),
        (_stale, Status.STALE),
        (_failed, Status.FAILED),
    ],
    ids=["done", "cancelled", "expired", "stale", "failed"],
)
def test_every_outcome_stores_its_notice_and_broadcasts_it_after_commit(
    ref, user, chat, propose, django_capture_on_commit_callbacks, capture_events, outcome, status
):
    note = Note.objects.create(owner=user, title="Shopping", body="milk")
    confirmation = propose("notes_update", {"note_id": note.pk, "body": "bread"})

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcome(ref, confirmation, user)

    notice = Message.objects.get(role=Message.Role.NOTICE, confirmation=confirmation)
    assert status_of(confirmation) == status
    assert (notice.conversation_id, notice.notice_code) == (chat.pk, f"confirmation_{status}")
    assert notice.notice_params == {"tool": "notes_update"}
    assert capture_events == []
    for callback in callbacks:
        callback()
    added = [(group, event) for group, event in capture_events if event["type"] == "agent.message_added"]
    assert added == [
        (topic(chat.pk), {"type": "agent.message_added", "conversation": str(chat.pk), "message": str(notice.pk)})
    ]


# -- settle_lapsed --------------------------------------------------------------


def test_settle_lapsed_expires_only_this_chats_lapsed_cards(user, chat, propose):
    lapsed = propose("notes_create", {"title": "Old"})
    fresh = propose("notes_create", {"title": "New"})
    other_chat = ConversationFactory(user=user)
    elsewhere = propose("notes_create", {"title": "Old"}, conversation=other_chat)
    lapse(lapsed)
    lapse(elsewhere)

    assert confirmations.settle_lapsed(chat) == 1

    assert (status_of(lapsed), status_of(fresh), status_of(elsewhere)) == (
        Status.EXPIRED,
        Status.WAITING,
        Status.WAITING,
    )
    assert notices_of(lapsed) == [("confirmation_expired", {"tool": "notes_create"})]
    assert notices_of(fresh) == [] and notices_of(elsewhere) == []


def test_settle_lapsed_takes_a_chat_id_and_does_nothing_twice(chat, propose):
    confirmation = propose("notes_create", {"title": "Old"})
    lapse(confirmation)

    assert confirmations.settle_lapsed(chat.pk) == 1
    assert confirmations.settle_lapsed(chat.pk) == 0

    assert len(notices_of(confirmation)) == 1


def test_settle_lapsed_on_a_deleted_chat_expires_the_card_without_a_notice(ref, chat, propose):
    confirmation = propose("notes_create", {"title": "Old"})
    lapse(confirmation)
    delete_conversation(ref, chat.pk, impersonated=False)

    assert confirmations.settle_lapsed(chat) == 1

    assert status_of(confirmation) == Status.EXPIRED
    assert notices_of(confirmation) == []
