"""What a session may see and run: ``visible_for`` and ``execute_as``."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.utils import timezone

from agent.access import authorize_session
from agent.models import Confirmation
from agent.tools import execute_as, visible_for
from tests.notes.models import Note
from tests.support.factories import ConversationFactory

CALLS: list[dict[str, Any]] = []


def record(ctx: Any, **args: Any) -> dict[str, Any]:
    CALLS.append({"ctx": ctx, **args})
    return {"echo": args}


def preview(ctx: Any, **args: Any) -> dict[str, Any]:
    return {"action": "Change something", **args}


@pytest.fixture(autouse=True)
def _calls() -> Any:
    CALLS.clear()
    yield
    CALLS.clear()


def names(tools: list[Any]) -> set[str]:
    return {t.name for t in tools}


def run(scope: Any, name: str, args: Any, chat: Any, **kwargs: Any) -> Any:
    return execute_as(scope, name, args, via="agent", chat=chat, call_id=kwargs.pop("call_id", "call_1"), **kwargs)


def revoke(user: Any, codename: str) -> None:
    user.user_permissions.remove(Permission.objects.get(content_type__app_label="notes", codename=codename))


# -- visible_for ----------------------------------------------------------------


def test_a_read_is_visible_while_its_permission_is_held(declare, scope):
    declare(record, name="t_held", permission="notes.view_note")
    declare(record, name="t_free")

    assert {"t_held", "t_free"} <= names(visible_for(scope))


def test_a_read_without_its_permission_is_not_visible(declare, scope):
    declare(record, name="t_not_held", permission="notes.delete_note")

    assert "t_not_held" not in names(visible_for(scope))


def test_visibility_follows_the_permission_now(declare, user, ref):
    declare(record, name="t_held", permission="notes.view_note")
    assert "t_held" in names(visible_for(authorize_session(ref, impersonated=False)))

    revoke(user, "view_note")

    assert "t_held" not in names(visible_for(authorize_session(ref, impersonated=False)))


def test_writes_are_visible_only_for_session_write_modules(declare, scope):
    declare(record, name="t_notes_write", kind="write", module="notes", preview=preview)
    declare(record, name="t_billing_write", kind="write", module="billing", preview=preview)

    visible = names(visible_for(scope))

    assert "t_notes_write" in visible and "notes_create" in visible
    assert "t_billing_write" not in visible


def test_no_writes_when_no_module_lets_a_session_write(scope):
    with override_settings(AGENT={**settings.AGENT, "SESSION_WRITE_MODULES": []}):
        visible = names(visible_for(scope))

    assert "notes_search" in visible
    assert not visible & {"notes_create", "notes_update"}


def test_a_write_also_needs_its_permission(user, ref):
    revoke(user, "add_note")

    visible = names(visible_for(authorize_session(ref, impersonated=False)))

    assert "notes_create" not in visible and "notes_update" in visible


def test_allow_narrows_the_visible_tools(scope):
    assert names(visible_for(scope, allow={"notes_search", "notes_nonexistent"})) == {"notes_search"}


# -- execute_as: refusals -------------------------------------------------------


def test_an_unknown_tool_is_denied(scope, chat):
    result = run(scope, "no_such_tool", {}, chat)

    assert result.outcome == "denied"


def test_a_tool_without_its_permission_is_denied_and_not_run(declare, scope, chat):
    declare(record, name="t_not_held", permission="notes.delete_note")

    result = run(scope, "t_not_held", {}, chat)

    assert result.outcome == "denied"
    assert CALLS == []


def test_a_tool_outside_allow_is_denied(declare, scope, chat):
    declare(record, name="t_free")

    result = run(scope, "t_free", {}, chat, allow={"notes_search"})

    assert result.outcome == "denied" and CALLS == []


def test_a_write_of_a_module_that_may_not_write_is_denied_without_a_card(declare, scope, chat):
    declare(record, name="t_billing_write", kind="write", module="billing", preview=preview)

    result = run(scope, "t_billing_write", {}, chat)

    assert result.outcome == "denied"
    assert not Confirmation.objects.exists()


@pytest.mark.parametrize(
    "args",
    [{"query": 5}, {"query": "x", "extra": 1}, ["query"], "query=x", None, {"query": "x" * 201}],
    ids=["wrong-type", "extra-key", "list", "string", "none", "too-long"],
)
def test_arguments_against_the_schema_are_invalid_arguments(declare, scope, chat, args):
    declare(
        record,
        name="t_query",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "maxLength": 200}},
            "additionalProperties": False,
        },
    )

    result = run(scope, "t_query", args, chat)

    assert result.outcome == "invalid_arguments"
    assert result.result["error"] == "invalid_arguments" and result.result["details"]
    assert CALLS == []


def test_a_missing_required_argument_of_a_write_makes_no_card(scope, chat):
    result = run(scope, "notes_create", {"body": "no title"}, chat)

    assert result.outcome == "invalid_arguments"
    assert not Confirmation.objects.exists()


# -- execute_as: reads ----------------------------------------------------------


def test_a_read_runs_with_the_sessions_user_and_returns_its_result(declare, scope, chat, user):
    declare(record, name="t_query", parameters={"type": "object", "properties": {"query": {"type": "string"}}})

    result = run(scope, "t_query", {"query": "milk"}, chat)

    assert (result.outcome, result.result) == ("ok", {"echo": {"query": "milk"}})
    ctx = CALLS[0]["ctx"]
    assert (ctx.user, ctx.scope, ctx.conversation, ctx.language) == (user, scope, chat, scope.language)


def test_a_site_read_sees_only_the_users_notes(scope, chat, user, make_user):
    Note.objects.create(owner=user, title="Buy milk")
    Note.objects.create(owner=make_user(), title="Their milk")

    result = run(scope, "notes_search", {"query": "milk"}, chat)

    assert result.outcome == "ok"
    assert [n["title"] for n in result.result["notes"]] == ["Buy milk"]


def test_a_reads_exception_is_an_error_with_its_class_name_only(declare, scope, chat, caplog):
    def broken(ctx: Any) -> None:
        raise LookupError("customer 4711 owes 99 EUR")

    declare(broken, name="t_broken")
    caplog.set_level(logging.ERROR, logger="agent.tools.executor")

    result = run(scope, "t_broken", {}, chat)

    assert (result.outcome, result.result) == ("error", {"error": "LookupError"})
    logged = [r for r in caplog.records if r.exc_info and r.exc_info[0] is LookupError]
    assert logged and "t_broken" in logged[0].getMessage()
    assert "4711" not in logged[0].getMessage()


# -- execute_as: writes ---------------------------------------------------------


def test_a_write_becomes_a_waiting_card_and_nothing_is_applied(scope, chat, user):
    before = timezone.now()

    result = run(scope, "notes_create", {"title": "Buy milk"}, chat, call_id="call_w")

    confirmation = Confirmation.objects.get()
    assert result.outcome == "needs_confirmation"
    assert result.result == {"status": "confirmation_required", "confirmation_id": str(confirmation.pk)}
    assert result.confirmation == confirmation
    assert (confirmation.user, confirmation.conversation, confirmation.tool_name, confirmation.call_id) == (
        user,
        chat,
        "notes_create",
        "call_w",
    )
    assert (confirmation.status, confirmation.arguments) == ("waiting", {"title": "Buy milk"})
    assert confirmation.preview == {"title": "Buy milk", "body": ""}
    assert confirmation.fingerprint
    assert before + timedelta(seconds=899) < confirmation.expires_at <= timezone.now() + timedelta(seconds=900)
    assert not Note.objects.exists()


def test_a_test_write_is_not_run_on_the_models_call(declare, scope, chat):
    declare(record, name="t_write", kind="write", module="notes", preview=preview)

    result = run(scope, "t_write", {}, chat)

    assert result.outcome == "needs_confirmation"
    assert CALLS == []


def test_an_identical_waiting_card_in_the_chat_is_denied(scope, chat):
    run(scope, "notes_create", {"title": "Buy milk"}, chat, call_id="call_1")

    again = run(scope, "notes_create", {"title": "Buy milk"}, chat, call_id="call_2")

    assert again.outcome == "denied"
    assert Confirmation.objects.count() == 1


def test_other_arguments_make_another_card(scope, chat):
    run(scope, "notes_create", {"title": "Buy milk"}, chat)

    other = run(scope, "notes_create", {"title": "Buy bread"}, chat)

    assert other.outcome == "needs_confirmation"
    assert Confirmation.objects.count() == 2


def test_the_same_write_in_another_chat_makes_another_card(scope, chat, user):
    run(scope, "notes_create", {"title": "Buy milk"}, chat)

    other = run(scope, "notes_create", {"title": "Buy milk"}, ConversationFactory(user=user))

    assert other.outcome == "needs_confirmation"


def test_a_decided_or_lapsed_card_does_not_block_the_same_write(scope, chat):
    first = run(scope, "notes_create", {"title": "Buy milk"}, chat).confirmation
    Confirmation.objects.filter(pk=first.pk).update(status=Confirmation.Status.CANCELLED)
    second = run(scope, "notes_create", {"title": "Buy milk"}, chat).confirmation
    Confirmation.objects.filter(pk=second.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    third = run(scope, "notes_create", {"title": "Buy milk"}, chat)

    assert third.outcome == "needs_confirmation"


def test_a_preview_that_raises_is_an_error_and_no_card(declare, scope, chat):
    def broken_preview(ctx: Any) -> None:
        raise KeyError("secret")

    declare(record, name="t_write", kind="write", module="notes", preview=broken_preview)

    result = run(scope, "t_write", {}, chat)

    assert (result.outcome, result.result) == ("error", {"error": "KeyError"})
    assert not Confirmation.objects.exists() and CALLS == []
