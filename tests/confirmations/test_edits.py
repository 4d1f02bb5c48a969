"""Cards the user edits before confirming: the edit goes through every check the model's call went
through, a refused edit leaves the card waiting, and the model reads what really ran."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import translation

from agent import confirmations
from agent.models import Confirmation, Message
from agent.tools.registry import Refused
from agent.turns import history
from tests.notes.models import Note

Status = Confirmation.Status
RENAME_SCHEMA = {
    "type": "object",
    "properties": {
        "note_id": {"type": "integer", "minimum": 1},
        "title": {"type": "string", "minLength": 1, "maxLength": 20},
        "pinned": {"type": "boolean"},
    },
    "required": ["note_id", "title"],
    "additionalProperties": False,
}


def _no_shouting(ctx: Any, note_id: int, title: str, pinned: bool = False) -> None:
    if title.isupper():
        raise ValidationError({"title": "A title may not be all capitals."})


def _rename_preview(ctx: Any, note_id: int, title: str, pinned: bool = False) -> dict[str, Any]:
    note = Note.objects.get(owner=ctx.user, pk=note_id)
    return {
        "fields": [
            {"name": "note_id", "label": "Note", "value": note_id, "editable": False},
            {"name": "title", "label": "Title", "value": title, "old": note.title, "editable": True, "type": "text"},
            {"name": "pinned", "label": "Pinned", "value": pinned, "editable": True, "type": "boolean"},
        ]
    }


@pytest.fixture
def renames(declare: Callable[..., Any]) -> list[dict[str, Any]]:
    """A hand-written write tool whose card offers its title and pin for editing; the calls it ran."""
    ran: list[dict[str, Any]] = []

    def notes_rename(ctx: Any, **args: Any) -> dict[str, Any]:
        ran.append(args)
        Note.objects.filter(owner=ctx.user, pk=args["note_id"]).update(title=args["title"])
        return {"ok": True}

    declare(
        notes_rename,
        name="notes_rename",
        kind="write",
        module="notes",
        permission="notes.change_note",
        parameters=RENAME_SCHEMA,
        preview=_rename_preview,
        validate=_no_shouting,
    )
    return ran


@pytest.fixture
def note(user: Any) -> Note:
    return Note.objects.create(owner=user, title="Buy mlik")


@pytest.fixture
def confirmation(renames: list[dict[str, Any]], note: Note, propose: Callable[..., Confirmation]) -> Confirmation:
    return propose("notes_rename", {"note_id": note.pk, "title": "Buy mlik!"})


def refusal(ref: Any, confirmation: Confirmation, edits: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as raised:
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits=edits)
    return raised.value.message_dict


def test_a_valid_edit_runs_the_write_once_with_the_users_values(ref, confirmation, note, renames):
    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Buy milk"})

    assert decided.status == Status.DONE
    assert renames == [{"note_id": note.pk, "title": "Buy milk"}]
    note.refresh_from_db()
    assert note.title == "Buy milk"
    stored = Confirmation.objects.get(pk=confirmation.pk)
    assert stored.edits == {"title": "Buy milk"} and stored.arguments["title"] == "Buy mlik!"  # both kept
    notice = Message.objects.get(role=Message.Role.NOTICE, confirmation=confirmation)
    assert (notice.notice_code, notice.notice_params) == ("confirmation_done", {"tool": "notes_rename", "edited": True})


def test_the_model_reads_that_the_user_edited_the_card_and_the_values_that_ran(ref, confirmation, chat):
    confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Buy milk"})

    window = history.load(chat.pk, {"role": "user", "content": "and now?"}, 10_000)

    said = [m["content"] for m in window if m["role"] == "user"][:-1]
    assert said == [f"[confirmation] done, edited by the user: notes_rename {json.dumps({'title': 'Buy milk'})}"]
    assert not any("Buy mlik!" in m["content"] for m in window)  # never the model's guess as if it ran


def test_an_edit_the_schema_refuses_leaves_the_card_waiting_with_the_fields_message(ref, confirmation, renames):
    fields = refusal(ref, confirmation, {"title": "x" * 21})

    assert fields == {"title": ["Ensure this value has at most 20 characters (it has 21)."]}
    assert Confirmation.objects.get(pk=confirmation.pk).status == Status.WAITING and renames == []


@pytest.mark.parametrize(
    "edits, english",
    [
        ({"title": ""}, "Ensure this value has at least 1 character (it has 0)."),
        ({"pinned": "yes"}, "Enter a valid value."),
    ],
)
def test_a_schema_refusal_is_told_in_the_users_language(ref, confirmation, edits, english):
    with translation.override("ru"):
        fields = refusal(ref, confirmation, edits)
    (messages,) = fields.values()
    assert messages and messages[0] != english and messages[0].strip()
    assert refusal(ref, confirmation, edits) == {next(iter(edits)): [english]}


def test_an_edit_the_tools_own_validation_refuses_leaves_the_card_waiting(ref, confirmation, note, renames):
    assert refusal(ref, confirmation, {"title": "BUY MILK"}) == {"title": ["A title may not be all capitals."]}
    assert Confirmation.objects.get(pk=confirmation.pk).status == Status.WAITING and renames == []
    # and the card still confirms with a good edit afterwards
    assert (
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Milk"}).status == Status.DONE
    )


@pytest.mark.parametrize(
    "edits",
    [{"note_id": 1}, {"owner": 2}, {"title": "Milk", "note_id": 1}],
    ids=["a field shown but not editable", "a field the card never offered", "one forged key among good ones"],
)
def test_a_key_the_card_does_not_offer_for_editing_refuses_the_whole_edit(ref, confirmation, note, renames, edits):
    fields = refusal(ref, confirmation, edits)

    assert set(fields) == set(edits) - {"title"}
    assert Confirmation.objects.get(pk=confirmation.pk).status == Status.WAITING and renames == []
    note.refresh_from_db()
    assert note.title == "Buy mlik"


def test_edits_that_are_not_a_mapping_are_refused(ref, confirmation, renames):
    assert refusal(ref, confirmation, ["title", "Milk"]) == {"__all__": ["The edits must map fields to values."]}
    assert renames == []


def test_an_edit_that_changes_nothing_is_no_edit(ref, confirmation, renames):
    decided = confirmations.confirm(
        ref, confirmation.pk, impersonated=False, edits={"title": "Buy mlik!", "pinned": False}
    )

    assert decided.status == Status.DONE and not Confirmation.objects.get(pk=confirmation.pk).edits
    assert renames == [{"note_id": confirmation.arguments["note_id"], "title": "Buy mlik!"}]


def test_a_permission_lost_before_an_edited_confirm_refuses_the_write(ref, user, confirmation, renames):
    user.user_permissions.remove(Permission.objects.get(content_type__app_label="notes", codename="change_note"))

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Milk"})

    assert decided.status == Status.FAILED and renames == []


def _site_rules(ctx: Any, note_id: int, title: str, pinned: bool = False) -> None:
    """The site's own checks answering as a view does: a 400's errors by field, a 400 for the whole
    call, a 403."""
    if Note.objects.filter(owner=ctx.user, title=title).exclude(pk=note_id).exists():
        raise Refused("invalid_arguments", {"error": "invalid_arguments", "details": {"title": ["Already taken."]}})
    if title == "?":
        raise Refused("invalid_arguments", {"error": "invalid_arguments", "details": ["Say what the note is."]})
    if title == "Secret":
        raise Refused("denied", {"error": "permission_denied", "message": "Not yours.", "status": 403})


@pytest.fixture
def checked_confirmation(declare: Callable[..., Any], note: Note, propose: Callable[..., Confirmation]) -> Confirmation:
    """A card of a tool whose own checks refuse as the site's views do (``Refused``)."""

    def notes_checked_rename(ctx: Any, **args: Any) -> None:
        Note.objects.filter(owner=ctx.user, pk=args["note_id"]).update(title=args["title"])

    declare(
        notes_checked_rename,
        name="notes_checked_rename",
        kind="write",
        module="notes",
        permission="notes.change_note",
        parameters=RENAME_SCHEMA,
        preview=_rename_preview,
        validate=_site_rules,
    )
    return propose("notes_checked_rename", {"note_id": note.pk, "title": "Buy mlik!"})


@pytest.mark.parametrize(
    "title, fields",
    [("Bread", {"title": ["Already taken."]}), ("?", {"__all__": ["Say what the note is."]})],
    ids=["a field's message", "a message for the whole card"],
)
def test_an_edit_the_tool_refuses_as_invalid_arguments_leaves_the_card_waiting(
    ref, user, checked_confirmation, note, title, fields
):
    Note.objects.create(owner=user, title="Bread")

    assert refusal(ref, checked_confirmation, {"title": title}) == fields

    assert Confirmation.objects.get(pk=checked_confirmation.pk).status == Status.WAITING
    note.refresh_from_db()
    assert note.title == "Buy mlik"
    decided = confirmations.confirm(ref, checked_confirmation.pk, impersonated=False, edits={"title": "Milk"})
    assert decided.status == Status.DONE  # and a good edit afterwards runs


def test_an_edit_the_tool_refuses_as_denied_ends_the_card_failed(ref, checked_confirmation, note):
    decided = confirmations.confirm(ref, checked_confirmation.pk, impersonated=False, edits={"title": "Secret"})

    assert (decided.status, decided.outcome) == (Status.FAILED, "not_permitted")
    note.refresh_from_db()
    assert note.title == "Buy mlik"


def test_the_api_answers_a_refused_edit_as_a_card_still_waiting_with_the_fields_messages(session, confirmation, note):
    client, _ref = session
    url = reverse("agent:confirmation_confirm", args=[confirmation.pk])

    refused = client.post(url, {"edits": {"title": "BUY MILK"}}, content_type="application/json")
    done = client.post(url, {"edits": {"title": "Buy milk"}}, content_type="application/json")

    # a refused edit is an answer the page expects (as an invalid form re-shown is): the card still waits
    assert refused.status_code == 200
    assert refused.json()["confirmation"] == {"id": str(confirmation.pk), "status": "waiting", "edited": False}
    assert refused.json()["refused"]["fields"] == {"title": ["A title may not be all capitals."]}
    assert done.status_code == 200 and done.json()["confirmation"] == {
        "id": str(confirmation.pk),
        "status": "done",
        "edited": True,
    }
    note.refresh_from_db()
    assert note.title == "Buy milk"
