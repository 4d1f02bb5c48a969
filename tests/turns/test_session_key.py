"""A turn's session key is kept sealed on its row: no query of the table can read or test it, and
the runner still checks the live session with it at every step."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from agent import turns
from agent.models import Turn
from agent.models.fields import seal, unseal
from agent.tasks import run_turn
from tests.support.factories import ConversationFactory, TurnFactory
from tests.support.model_server import answer, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)
PURPOSE = "turn-session-key"


def stored_key(turn_id: Any) -> str:
    """The column as the database holds it, read past the model."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_key FROM agent_turn WHERE id = %s", [turn_id])
        return cursor.fetchone()[0]


def test_a_queued_turn_holds_its_session_key_only_sealed(ref: Any, chat: Any, endpoint: Any) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    raw = stored_key(turn.pk)
    assert raw and ref.session_key not in raw
    assert Turn.objects.get(pk=turn.pk).session_key == ref.session_key
    assert not Turn.objects.filter(session_key__startswith=ref.session_key[:4]).exists()


def test_a_running_turn_checks_its_session_with_the_sealed_key(
    ref: Any, chat: Any, endpoint: Any, model_server: Any, declare: Any
) -> None:
    # given a tool that looks at the turn's row while the turn runs
    seen: list[str] = []
    declare(
        lambda ctx: seen.extend(stored_key(t) for t in Turn.objects.values_list("pk", flat=True)) or {}, name="peek"
    )
    model_server.push(tool_calls(("peek", {})), answer("done"))
    turn = turns.start(ref, chat.pk, "look", impersonated=False)
    # when it runs
    run_turn(str(turn.pk))
    # then the round after the tool passed its checks, and the key was never in the row as it is
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason, len(model_server.requests)) == ("finished", "", 2)
    assert seen and all(value and ref.session_key not in value for value in seen)
    assert stored_key(turn.pk) == ""


def test_a_key_that_no_secret_opens_is_a_session_gone(ref: Any, chat: Any, endpoint: Any, model_server: Any) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    with override_settings(SECRET_KEY="another site's secret"):
        foreign = seal(ref.session_key, PURPOSE)
    Turn.objects.filter(pk=turn.pk).update(session_key="")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE agent_turn SET session_key = %s WHERE id = %s", [foreign, turn.pk])
    run_turn(str(turn.pk))
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("failed", "session_ended") and model_server.requests == []


def test_a_rotated_secret_still_opens_keys_sealed_before_it() -> None:
    with override_settings(SECRET_KEY="old secret"):
        token = seal("the-session-key", PURPOSE)
    with override_settings(SECRET_KEY="new secret", SECRET_KEY_FALLBACKS=["old secret"]):
        assert unseal(token, PURPOSE) == "the-session-key"
        assert unseal(seal("the-session-key", PURPOSE), PURPOSE) == "the-session-key"
    with override_settings(SECRET_KEY="new secret", SECRET_KEY_FALLBACKS=[]):
        assert unseal(token, PURPOSE) == ""


def test_a_key_sealed_for_one_purpose_does_not_open_for_another() -> None:
    assert unseal(seal("the-session-key", PURPOSE), "something-else") == ""


def test_the_migration_seals_live_turns_keys_and_empties_ended_ones(user: Any) -> None:
    # given rows as the schema before kept them: plain keys, one on a turn that ended
    chat = ConversationFactory(user=user)
    live, ended = (
        TurnFactory(conversation=chat, user=user, language="en", text="t", status=status, deadline_at=timezone.now())
        for status in (Turn.Status.RUNNING, Turn.Status.FINISHED)
    )
    with connection.cursor() as cursor:
        for turn, key in ((live, "plain-live-key"), (ended, "plain-ended-key")):
            cursor.execute("UPDATE agent_turn SET session_key = %s WHERE id = %s", [key, turn.pk])
    migration = importlib.import_module("agent.migrations.0006_staff_and_secrets")
    # when the data step runs
    with connection.schema_editor() as editor:
        migration.seal_live_session_keys(apps, editor)
    # then
    assert stored_key(live.pk) not in ("", "plain-live-key") and stored_key(ended.pk) == ""
    assert Turn.objects.get(pk=live.pk).session_key == "plain-live-key"
    with connection.schema_editor() as editor:
        migration.open_live_session_keys(apps, editor)
    assert stored_key(live.pk) == "plain-live-key"
