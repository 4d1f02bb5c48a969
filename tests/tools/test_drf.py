"""Tools from a DRF viewset refuse exactly what the same user's HTTP request is refused, and their
writes are cards the user can correct, dispatched through the view again at Confirm."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import authentication, permissions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from agent import confirmations
from agent.access import authorize_session
from agent.core.errors import NotWaiting
from agent.models import Confirmation
from agent.tools import execute_as, registry
from agent.tools.drf import register_viewset
from tests.notes.api import NoteSerializer, NoteViewSet
from tests.notes.models import Note
from tests.support.factories import UserFactory

pytestmark = pytest.mark.django_db
Status = Confirmation.Status
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def tools() -> Iterator[dict[str, Any]]:
    made = register_viewset(NoteViewSet, basename="note")
    cache.clear()  # the throttle's counts
    yield {tool.name: tool for tool in made}
    for tool in made:
        registry.unregister(tool.name)


@pytest.fixture
def mine(user: Any) -> Note:
    return Note.objects.create(owner=user, title="Buy mlik", body="two litres")


@pytest.fixture
def others() -> dict[str, Note]:
    stranger = UserFactory()
    return {
        "private": Note.objects.create(owner=stranger, title="Diary"),
        "shared": Note.objects.create(owner=stranger, title="[shared] Recipes"),
    }


def call(ref: Any, chat: Any, name: str, args: dict[str, Any]) -> Any:
    """The tool as the model's call runs it: through the executor, with the live session's scope."""
    scope = authorize_session(ref, impersonated=False)
    return execute_as(scope, name, args, via="agent", chat=chat, call_id="call_1")


def http(client: Any, method: str, url: str, data: Any = None) -> Any:
    send = getattr(client, method.lower())
    return send(url, data, content_type="application/json", **JSON) if data is not None else send(url, **JSON)


# -- the same refusals as the user's own HTTP request ----------------------------------------

OUTCOME_OF_STATUS = {200: "ok", 201: "needs_confirmation", 400: "invalid_arguments", 403: "denied", 404: "denied"}


@pytest.mark.parametrize(
    "case, method, url, tool, args",
    [
        ("list: own and shared", "GET", "/api/notes/", "note_list", {}),
        ("retrieve: own", "GET", "/api/notes/{mine}/", "note_retrieve", {"pk": "{mine}"}),
        ("retrieve: shared", "GET", "/api/notes/{shared}/", "note_retrieve", {"pk": "{shared}"}),
        (
            "retrieve: get_queryset hides another's",
            "GET",
            "/api/notes/{private}/",
            "note_retrieve",
            {"pk": "{private}"},
        ),
        (
            "change: object permission",
            "PATCH",
            "/api/notes/{shared}/",
            "note_partial_update",
            {"pk": "{shared}", "title": "Mine now"},
        ),
        (
            "change: hidden object",
            "PATCH",
            "/api/notes/{private}/",
            "note_partial_update",
            {"pk": "{private}", "title": "x"},
        ),
        ("create: serializer rule", "POST", "/api/notes/", "note_create", {"title": "SHOUTING"}),
        ("delete: model permission", "DELETE", "/api/notes/{mine}/", "note_destroy", {"pk": "{mine}"}),
        ("action: object permission", "POST", "/api/notes/{shared}/archive/", "note_archive", {"pk": "{shared}"}),
        (
            "action: its own permission classes",
            "POST",
            "/api/notes/{mine}/pin/",
            "note_pin",
            {"pk": "{mine}", "place": 1},
        ),
    ],
)
def test_the_tool_is_refused_exactly_what_the_users_http_request_is_refused(
    session, chat, tools, mine, others, case, method, url, tool, args
):
    client, ref = session
    ids = {"mine": mine.pk, **{name: note.pk for name, note in others.items()}}
    args = {k: (int(v.format(**ids)) if isinstance(v, str) and v.startswith("{") else v) for k, v in args.items()}
    body = {k: v for k, v in args.items() if k != "pk"}

    answer = call(ref, chat, tool, args)  # first: the request below must not use up anything the tool needs
    response = http(client, method, url.format(**ids), body if method in ("POST", "PATCH") else None)

    assert OUTCOME_OF_STATUS[response.status_code] == answer.outcome, (case, response.status_code, answer.result)
    if response.status_code == 400:
        assert answer.result["details"] == ["title: A title may not be all capitals."]
    if answer.outcome == "denied" and case in REFUSED_BY_HAS_PERMISSION:  # not offered at all
        assert answer.result["error"] == "not_available" and response.status_code == 403
    elif answer.outcome == "denied":
        assert answer.result["status"] == response.status_code


REFUSED_BY_HAS_PERMISSION = {"delete: model permission", "action: its own permission classes"}


def test_a_throttled_user_is_throttled_through_the_tool_too(session, chat, tools):
    client, ref = session
    for n in range(3):
        assert http(client, "POST", "/api/notes/", {"title": f"Note {n}"}).status_code == 201

    answer = call(ref, chat, "note_create", {"title": "One more"})

    assert http(client, "POST", "/api/notes/", {"title": "And another"}).status_code == 429
    assert (answer.outcome, answer.result["error"], answer.result["status"]) == ("denied", "throttled", 429)


def test_a_note_made_through_the_assistant_counts_once_against_the_throttle_as_a_request_does(session, chat, tools):
    client, ref = session
    # given: three notes proposed, one of them edited on its card, and confirmed
    for n, edits in enumerate([None, {"title": "Edited on the card"}, None]):
        answer = call(ref, chat, "note_create", {"title": f"Note {n}"})
        assert answer.outcome == "needs_confirmation", answer.result
        decided = confirmations.confirm(ref, answer.confirmation.pk, impersonated=False, edits=edits)
        assert decided.status == Status.DONE
    # then: the three-an-hour throttle is used up, for the tool and for HTTP alike, and no sooner
    assert Note.objects.count() == 3
    answer = call(ref, chat, "note_create", {"title": "One more"})
    assert (answer.outcome, answer.result["error"]) == ("denied", "throttled")
    assert answer.result["message"].startswith("Request was throttled. Expected available in")
    assert not Confirmation.objects.filter(status=Status.WAITING).exists()  # no card for a throttled user
    assert http(client, "POST", "/api/notes/", {"title": "And another"}).status_code == 429


def test_a_read_counts_once_against_the_users_throttle_as_a_request_does(session, chat, tools, mine):
    client, ref = session
    for _n in range(3):
        assert call(ref, chat, "note_retrieve", {"pk": mine.pk}).outcome == "ok"
    for _n in range(2):
        assert http(client, "GET", f"/api/notes/{mine.pk}/").status_code == 200

    assert http(client, "GET", f"/api/notes/{mine.pk}/").status_code == 429  # five an hour
    answer = call(ref, chat, "note_retrieve", {"pk": mine.pk})
    assert (answer.outcome, answer.result["error"], answer.result["status"]) == ("denied", "throttled", 429)


def test_a_card_made_before_the_user_was_throttled_fails_at_confirm_as_the_request_would(session, chat, tools):
    client, ref = session
    confirmation = call(ref, chat, "note_create", {"title": "Made last"}).confirmation
    for n in range(3):
        assert http(client, "POST", "/api/notes/", {"title": f"Note {n}"}).status_code == 201

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert (decided.status, decided.outcome) == (Status.FAILED, "denied")
    assert not Note.objects.filter(title="Made last").exists()


class TokenOnlyViewSet(viewsets.ReadOnlyModelViewSet):
    """An API for apps, which sign in by token."""

    queryset = Note.objects.all()
    serializer_class = NoteSerializer
    permission_classes = [permissions.IsAuthenticated]
    authentication_classes = [authentication.TokenAuthentication]


class TokenOrSessionViewSet(TokenOnlyViewSet):
    authentication_classes = [authentication.TokenAuthentication, authentication.SessionAuthentication]


@pytest.mark.parametrize(
    "viewset, outcome", [(TokenOnlyViewSet, "denied"), (TokenOrSessionViewSet, "ok")], ids=["token alone", "or session"]
)
def test_a_viewset_reached_by_token_alone_is_not_offered_to_the_tools_session_request(
    ref, chat, mine, viewset, outcome
):
    (tool,) = register_viewset(viewset, basename="token", actions=["list"])
    try:
        answer = call(ref, chat, "token_list", {})
    finally:
        registry.unregister(tool.name)

    assert answer.outcome == outcome
    if outcome == "denied":  # its permission classes refuse the session's request: not offered at all
        assert answer.result["error"] == "not_available"
    else:
        assert [note["title"] for note in answer.result] == ["Buy mlik"]


def test_a_read_answers_with_the_views_data_paginated_filtered_and_ordered(ref, user, chat, tools, others):
    for title in ("milk", "bread", "oat milk"):
        Note.objects.create(owner=user, title=title)

    page = call(ref, chat, "note_list", {"search": "milk", "ordering": "-title"})

    assert page.outcome == "ok"
    assert page.result["count"] == 2 and [n["title"] for n in page.result["results"]] == ["oat milk", "milk"]
    everything = call(ref, chat, "note_list", {"page": 2}).result
    assert everything["count"] == 4 and len(everything["results"]) == 2  # three own notes and one shared
    assert "Diary" not in str(everything)


def test_parameters_come_from_the_serializer_the_filters_and_the_pages(tools):
    listing = tools["note_list"].parameters["properties"]
    assert {"search", "ordering", "page"} <= set(listing)
    create = tools["note_create"].parameters
    assert create["required"] == ["title"] and set(create["properties"]) == {"title", "body"}  # no read-only fields
    assert create["properties"]["title"]["maxLength"] == 200
    assert create["properties"]["title"]["description"] == "A short name for the note."
    partial = tools["note_partial_update"].parameters
    assert partial["required"] == ["pk"] and {"pk", "title", "body"} == set(partial["properties"])
    kinds = {name: tool.kind for name, tool in tools.items()}
    assert kinds == {
        "note_list": "read",
        "note_retrieve": "read",
        "note_create": "write",
        "note_update": "write",
        "note_partial_update": "write",
        "note_destroy": "write",
        "note_archive": "write",
        "note_pin": "write",
    }
    assert tools["note_archive"].description.startswith("Mark a note archived")
    assert tools["note_list"].description.startswith("List the notes the user may see")  # not the viewset's docstring
    assert {tool.module for tool in tools.values() if tool.kind == "write"} == {"notes"}


def test_an_actions_own_serializer_gives_its_parameters(tools):
    pin = tools["note_pin"].parameters

    assert set(pin["properties"]) == {"pk", "place"} and pin["required"] == ["pk"]
    assert pin["properties"]["place"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 9,
        "description": "Where among the pinned notes it goes.",
    }


def test_an_action_runs_with_its_own_permission_classes_and_serializer(ref, user, chat, tools, mine):
    user.is_staff = True
    user.save(update_fields=["is_staff"])

    answer = call(ref, chat, "note_pin", {"pk": mine.pk, "place": 2})
    assert answer.outcome == "needs_confirmation", answer.result
    assert confirmations.confirm(ref, answer.confirmation.pk, impersonated=False).status == Status.DONE

    mine.refresh_from_db()
    assert mine.title == "[2] Buy mlik"  # DjangoModelPermissions, the viewset's own, was not asked


class LabelSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)


class LabelViewSet(viewsets.GenericViewSet):
    """Notes' labels: read with GET, set with POST on the same URL."""

    queryset = Note.objects.all()
    serializer_class = NoteSerializer

    def get_queryset(self) -> Any:
        return Note.objects.filter(owner=self.request.user)

    @action(detail=True, methods=["get"], serializer_class=LabelSerializer)
    def label(self, request: Any, pk: Any = None) -> Response:
        return Response({"label": self.get_object().title})

    @label.mapping.post
    def relabel(self, request: Any, pk: Any = None) -> Response:
        note = self.get_object()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        note.title = serializer.validated_data["title"]
        note.save(update_fields=["title"])
        return Response({"label": note.title})


def test_an_actions_unsafe_method_runs_the_handler_its_mapping_names(ref, chat, mine):
    (tool,) = register_viewset(LabelViewSet, basename="label", actions=["label"])
    try:
        answer = call(ref, chat, "label_label", {"pk": mine.pk, "title": "Oat milk"})
        assert (tool.kind, answer.outcome) == ("write", "needs_confirmation")
        assert confirmations.confirm(ref, answer.confirmation.pk, impersonated=False).status == Status.DONE
    finally:
        registry.unregister(tool.name)

    mine.refresh_from_db()
    assert mine.title == "Oat milk"


def test_django_filter_fields_are_a_lists_parameters(tools):
    listing = tools["note_list"].parameters["properties"]

    assert listing["title"] == {"type": "string", "description": "Words in the title"}
    assert listing["archived"] == {"type": "boolean", "description": "Archived notes only, or none"}
    assert listing["body"] == {"type": "string", "description": "Body contains"}  # django-filter's own label


@pytest.mark.parametrize(
    "query", [{"archived": True}, {"archived": False}, {"title": "MILK"}, {"body": "litres", "archived": False}]
)
def test_a_list_filtered_by_django_filter_answers_as_the_users_request_does(session, chat, tools, mine, query):
    client, ref = session
    Note.objects.create(owner=mine.owner, title="[archived] Old milk")
    Note.objects.create(owner=mine.owner, title="Oat milk", body="one litre")

    answer = call(ref, chat, "note_list", query)
    response = client.get("/api/notes/", {k: str(v).lower() for k, v in query.items()}, **JSON)

    assert answer.outcome == "ok" and response.status_code == 200
    assert answer.result["count"] >= 1 and answer.result == response.json()


class TitleFilteredViewSet(viewsets.ReadOnlyModelViewSet):
    """Notes filtered by django-filter's fields named on the viewset."""

    queryset = Note.objects.all()
    serializer_class = NoteSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_fields = {"title": ["exact", "icontains"], "id": ["gte"]}

    def get_queryset(self) -> Any:
        return Note.objects.filter(owner=self.request.user).order_by("id")


def test_a_viewsets_filterset_fields_are_parameters_and_filter_the_list(ref, chat, mine):
    made = register_viewset(TitleFilteredViewSet, basename="titled", actions=["list"])
    try:
        listing = made[0].parameters["properties"]
        Note.objects.create(owner=mine.owner, title="Oat milk")
        found = call(ref, chat, "titled_list", {"title__icontains": "MILK", "id__gte": mine.pk}).result
    finally:
        registry.unregister(made[0].name)

    assert listing["title"]["type"] == "string" and listing["title__icontains"]["type"] == "string"
    assert listing["id__gte"]["type"] == "number"
    assert [note["title"] for note in found] == ["Oat milk"]


# -- writes are cards ---------------------------------------------------------------


def propose_rename(ref: Any, chat: Any, note: Note, title: str = "Oat milk") -> Confirmation:
    answer = call(ref, chat, "note_partial_update", {"pk": note.pk, "title": title})
    assert answer.outcome == "needs_confirmation", answer.result
    return answer.confirmation


def test_an_update_is_a_card_showing_old_and_new_and_runs_only_at_confirm(ref, chat, tools, mine):
    confirmation = propose_rename(ref, chat, mine)

    rows = {row["name"]: row for row in confirmation.preview["fields"]}
    assert rows["pk"] == {"name": "pk", "label": "Note", "value": "Buy mlik", "editable": False}
    assert rows["title"] == {
        "name": "title",
        "label": "Title",
        "value": "Oat milk",
        "old": "Buy mlik",
        "editable": True,
        "type": "text",
    }
    mine.refresh_from_db()
    assert mine.title == "Buy mlik"  # nothing ran before the click
    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE
    mine.refresh_from_db()
    assert (mine.title, mine.body) == ("Oat milk", "two litres")


def test_a_permission_removed_between_the_card_and_the_click_refuses_the_write(ref, user, chat, tools, mine):
    confirmation = propose_rename(ref, chat, mine)
    user.user_permissions.remove(Permission.objects.get(content_type__app_label="notes", codename="change_note"))

    decided = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert (decided.status, decided.outcome) == (Status.FAILED, "denied")
    mine.refresh_from_db()
    assert mine.title == "Buy mlik"


def test_an_object_changed_since_the_card_refuses_the_write_as_stale(ref, chat, tools, mine):
    confirmation = propose_rename(ref, chat, mine)
    Note.objects.filter(pk=mine.pk).update(body="three litres")

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.STALE
    mine.refresh_from_db()
    assert mine.title == "Buy mlik"


def test_an_edit_the_serializer_refuses_leaves_the_card_waiting_with_its_message(ref, chat, tools, mine):
    confirmation = propose_rename(ref, chat, mine)

    with pytest.raises(ValidationError) as refused:
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "OAT MILK"})

    assert refused.value.message_dict == {"title": ["A title may not be all capitals."]}
    assert Confirmation.objects.get(pk=confirmation.pk).status == Status.WAITING


def test_an_edit_that_passes_runs_once_with_the_users_value(ref, chat, tools, mine):
    confirmation = propose_rename(ref, chat, mine, title="Oat mlik")

    assert (
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Oat milk"}).status
        == Status.DONE
    )

    mine.refresh_from_db()
    assert mine.title == "Oat milk"
    with pytest.raises(NotWaiting):  # a second click runs nothing
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Again"})


@pytest.mark.parametrize("forged", [{"body": "changed too"}, {"pk": 1}, {"owner": "someone"}])
def test_an_edit_of_a_field_the_card_did_not_offer_is_refused(ref, chat, tools, mine, forged):
    confirmation = propose_rename(ref, chat, mine)

    with pytest.raises(ValidationError):
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"title": "Oat milk", **forged})

    mine.refresh_from_db()
    assert (mine.title, mine.body) == ("Buy mlik", "two litres")


def test_a_create_card_is_validated_by_the_serializer_and_made_by_the_view(ref, user, chat, tools):
    answer = call(ref, chat, "note_create", {"title": "Buy milk", "body": "oat"})
    assert answer.outcome == "needs_confirmation" and not Note.objects.exists()

    assert confirmations.confirm(ref, answer.confirmation.pk, impersonated=False).status == Status.DONE

    assert list(Note.objects.values_list("owner", "title", "body")) == [(user.pk, "Buy milk", "oat")]


def test_a_delete_card_shows_what_would_be_deleted(ref, user, chat, tools, mine):
    user.user_permissions.add(Permission.objects.get(content_type__app_label="notes", codename="delete_note"))
    answer = call(ref, chat, "note_destroy", {"pk": mine.pk})

    rows = {row["name"]: row["value"] for row in answer.confirmation.preview["fields"]}
    assert rows["title"] == "Buy mlik" and rows["body"] == "two litres"
    assert not any(row["editable"] for row in answer.confirmation.preview["fields"])
    assert confirmations.confirm(ref, answer.confirmation.pk, impersonated=False).status == Status.DONE
    assert not Note.objects.filter(pk=mine.pk).exists()


def test_the_view_sees_the_live_session_s_user_session_and_language(ref, user, chat, tools, mine):
    scope = authorize_session(ref, impersonated=False)
    from agent.tools.registry import ToolContext

    request = ToolContext(user, scope, chat, None, "et").request
    assert request.user == user and request.session.session_key == ref.session_key
    assert request.method == "GET" and request.LANGUAGE_CODE == scope.language
    assert "session_key" not in repr(ToolContext(user, scope, chat, None, "et"))


def test_the_app_runs_without_drf_installed_and_only_agent_tools_drf_imports_it():
    import pathlib
    import subprocess
    import sys

    imports = [
        str(path.relative_to(pathlib.Path("agent").resolve().parent))
        for path in pathlib.Path("agent").resolve().rglob("*.py")
        if "rest_framework" in path.read_text()
    ]
    assert imports and all(path.startswith("agent/tools/drf/") for path in imports)
    assert not [path for path in pathlib.Path("agent").resolve().rglob("*.py") if "django_filters" in path.read_text()]
    script = (
        "import sys; sys.modules['rest_framework'] = None\n"  # an import of it now fails
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings'; django.setup()\n"
        "import importlib, pkgutil, agent\n"
        "for m in pkgutil.walk_packages(agent.__path__, 'agent.'):\n"
        "    if not m.name.startswith('agent.tools.drf') and '.migrations.' not in m.name:\n"
        "        importlib.import_module(m.name)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
