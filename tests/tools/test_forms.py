"""Tools from the site's forms: the form's fields are the parameters, its ``is_valid()`` judges the
model's call and the user's edits, and a ModelForm saves only at Confirm, bound and checked again."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from django import forms
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db.models.signals import post_save

from agent import confirmations
from agent.access import authorize_session
from agent.models import Confirmation
from agent.tools import execute_as, registry
from agent.tools.forms import register_form
from tests.notes.models import Note
from tests.support.factories import UserFactory
from tests.support.races import at_once

pytestmark = pytest.mark.django_db
Status = Confirmation.Status


class NoteForm(forms.ModelForm):
    class Meta:
        model = Note
        fields = ["title", "body"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("title") and data["title"] == data.get("body"):
            raise ValidationError("The text must say more than the title.")
        if data.get("title", "").isupper():
            self.add_error("title", "A title may not be all capitals.")
        return data


class CountForm(forms.Form):
    word = forms.CharField(max_length=20, help_text="The word to count.")
    times = forms.IntegerField(min_value=1, max_value=3, required=False)


@pytest.fixture
def note_form() -> Iterator[Any]:
    tool = register_form(
        NoteForm,
        name="note_form_edit",
        module="notes",
        permission="notes.change_note",
        description="Change one of the user's notes.",
        instance=lambda ctx, note_id, **rest: Note.objects.get(owner=ctx.user, pk=note_id),
        extra_parameters={"note_id": {"type": "integer", "minimum": 1}},
    )
    yield tool
    registry.unregister(tool.name)


@pytest.fixture
def count_form() -> Iterator[Any]:
    tool = register_form(
        CountForm,
        name="word_count",
        kind="read",
        description="Count how often a word is in the user's notes.",
        save=lambda ctx, form: {
            "count": Note.objects.filter(owner=ctx.user, body__contains=form.cleaned_data["word"]).count()
        },
    )
    yield tool
    registry.unregister(tool.name)


@pytest.fixture
def mine(user: Any) -> Note:
    return Note.objects.create(owner=user, title="Buy mlik", body="two litres")


def call(ref: Any, chat: Any, name: str, args: dict[str, Any]) -> Any:
    scope = authorize_session(ref, impersonated=False)
    return execute_as(scope, name, args, via="agent", chat=chat, call_id="call_1")


def test_parameters_come_from_the_forms_fields(note_form, count_form):
    assert count_form.parameters["properties"]["word"] == {
        "type": "string",
        "maxLength": 20,
        "description": "The word to count.",
    }
    assert count_form.parameters["properties"]["times"] == {"type": "integer", "minimum": 1.0, "maximum": 3.0}
    assert count_form.parameters["required"] == ["word"]
    assert note_form.parameters["required"] == ["note_id"]  # an edit sets what it changes
    assert set(note_form.parameters["properties"]) == {"title", "body", "note_id"}


class PriceForm(forms.Form):
    price = forms.DecimalField(min_value=0, max_digits=6, decimal_places=2)
    weight = forms.FloatField()


def test_a_decimal_or_float_field_takes_a_number_not_only_an_integer(ref, chat):
    tool = register_form(
        PriceForm, name="price_check", kind="read", description="Check a price.", save=lambda ctx, form: "ok"
    )
    try:
        properties = tool.parameters["properties"]
        answer = call(ref, chat, "price_check", {"price": 2.5, "weight": 0.75})
    finally:
        registry.unregister(tool.name)

    assert properties["price"] == {"type": "number", "minimum": 0.0} and properties["weight"] == {"type": "number"}
    assert (answer.outcome, answer.result) == ("ok", "ok")


def test_a_read_form_runs_its_save_on_a_valid_call_and_refuses_an_invalid_one(ref, chat, count_form, mine):
    assert call(ref, chat, "word_count", {"word": "litres"}).result == {"count": 1}
    refused = call(ref, chat, "word_count", {"word": "litres", "times": 0})
    assert refused.outcome == "invalid_arguments" and refused.result["details"][0].startswith("times: ")


def test_a_model_form_edit_is_a_card_of_old_and_new_and_saves_only_at_confirm(ref, chat, note_form, mine):
    answer = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat mlik"})

    assert answer.outcome == "needs_confirmation"
    (row,) = answer.confirmation.preview["fields"]
    assert row == {
        "name": "title",
        "label": "Title",
        "value": "Oat mlik",
        "old": "Buy mlik",
        "editable": True,
        "type": "text",
    }
    mine.refresh_from_db()
    assert mine.title == "Buy mlik"
    decided = confirmations.confirm(ref, answer.confirmation.pk, impersonated=False, edits={"title": "Oat milk"})
    assert decided.status == Status.DONE
    mine.refresh_from_db()
    assert (mine.title, mine.body) == ("Oat milk", "two litres")  # the field not given kept its value


def test_the_forms_clean_refuses_the_models_call_and_the_users_edit(ref, chat, note_form, mine):
    shouting = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "OAT MILK"})
    assert shouting.outcome == "invalid_arguments"
    assert shouting.result["details"] == ["title: A title may not be all capitals."]

    confirmation = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat milk"}).confirmation
    with pytest.raises(ValidationError) as refused:
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "two litres"})
    assert refused.value.message_dict == {"__all__": ["The text must say more than the title."]}
    assert Confirmation.objects.get(pk=confirmation.pk).status == Status.WAITING


def test_an_object_changed_since_the_card_refuses_the_save_as_stale(ref, chat, note_form, mine):
    confirmation = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat milk"}).confirmation
    Note.objects.filter(pk=mine.pk).update(body="three litres")

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.STALE
    mine.refresh_from_db()
    assert mine.title == "Buy mlik"


@pytest.mark.parametrize("whose", ["another user's", "none at all"])
def test_a_note_the_sites_instance_does_not_find_is_denied_the_same_whether_another_users_or_none(
    ref, chat, note_form, whose
):
    theirs = Note.objects.create(owner=UserFactory(), title="Diary")
    note_id = theirs.pk if whose == "another user's" else theirs.pk + 1000

    answer = call(ref, chat, "note_form_edit", {"note_id": note_id, "title": "Mine"})

    assert (answer.outcome, answer.result) == ("denied", {"error": "not_found", "message": "Not found."})
    assert Note.objects.get(pk=theirs.pk).title == "Diary" and not Confirmation.objects.exists()


def test_a_note_deleted_before_confirm_refuses_the_save(ref, chat, note_form, mine):
    confirmation = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat milk"}).confirmation
    mine.delete()

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert (decided.status, decided.outcome) == (Status.FAILED, "denied")
    assert not Note.objects.exists()


@pytest.mark.parametrize("edits", [None, {"title": "Oat milk!"}], ids=["as proposed", "edited"])
def test_a_permission_removed_before_confirm_refuses_the_save(ref, user, chat, note_form, mine, edits):
    confirmation = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat milk"}).confirmation
    user.user_permissions.remove(Permission.objects.get(content_type__app_label="notes", codename="change_note"))

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False, edits=edits)

    assert decided.status == Status.FAILED
    mine.refresh_from_db()
    assert (mine.title, mine.body) == ("Buy mlik", "two litres")


@pytest.mark.parametrize(
    "forged",
    [{"body": "changed too"}, {"note_id": "theirs"}, {"owner": "theirs"}],
    ids=["a form field the card did not offer", "the object's id", "a field the form does not have"],
)
def test_an_edit_of_a_key_the_card_did_not_offer_is_refused_and_changes_nothing(ref, chat, note_form, mine, forged):
    theirs = Note.objects.create(owner=UserFactory(), title="Diary", body="private")
    forged = {key: theirs.pk if value == "theirs" else value for key, value in forged.items()}
    confirmation = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat mlik"}).confirmation

    with pytest.raises(ValidationError) as refused:
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Oat milk", **forged})

    assert set(refused.value.message_dict) == set(forged)
    assert Confirmation.objects.get(pk=confirmation.pk).status == Status.WAITING
    assert set(Note.objects.values_list("title", "body", "owner")) == {
        ("Buy mlik", "two litres", mine.owner_id),
        ("Diary", "private", theirs.owner_id),
    }


def test_a_form_field_the_card_did_not_offer_keeps_its_value_through_an_edited_save(ref, chat, note_form, mine):
    confirmation = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat mlik"}).confirmation
    assert [row["name"] for row in confirmation.preview["fields"]] == ["title"]

    assert (
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Oat milk"}).status
        == Status.DONE
    )

    mine.refresh_from_db()
    assert (mine.title, mine.body, mine.owner_id) == ("Oat milk", "two litres", confirmation.user_id)


def test_a_plain_form_needs_a_save_and_a_write_needs_a_module():
    with pytest.raises(ImproperlyConfigured):
        register_form(CountForm, name="no_save", description="x", module="notes")
    with pytest.raises(ImproperlyConfigured):
        register_form(NoteForm, name="no_module", description="x")


@pytest.mark.django_db(transaction=True)
def test_a_double_click_saves_the_form_once(ref, chat, note_form, mine):
    confirmation = call(ref, chat, "note_form_edit", {"note_id": mine.pk, "title": "Oat milk"}).confirmation
    saved: list[Any] = []
    post_save.connect(lambda instance, **kw: saved.append(instance.pk), sender=Note, weak=False, dispatch_uid="saves")
    try:
        outcomes = at_once(*[lambda: confirmations.confirm(ref, confirmation.pk, impersonated=False).status] * 2)
    finally:
        post_save.disconnect(sender=Note, dispatch_uid="saves")

    assert sorted(type(v).__name__ if kind == "error" else v for kind, v in outcomes) == ["NotWaiting", "done"]
    assert saved == [mine.pk]
    mine.refresh_from_db()
    assert mine.title == "Oat milk"
