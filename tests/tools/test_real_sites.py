"""Tools from a real site's DRF app and forms (``tests.babycare``, built on the patterns of public
apps: babybuddy's diary and DRF's own tutorial), each compared with the same HTTP request of the
same user where that is the point: nothing happens before Confirm, registration needs no request,
edits keep what the user did not touch, cards go stale only when the write's data changed, the
model learns what a write returned, requests run at the router's path, only usable tools are
offered, and schemas stay readable."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any, Iterator

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework import permissions, viewsets
from rest_framework.response import Response

from agent import confirmations
from agent.access import authorize_session
from agent.checks.settings import check_tools_left_out
from agent.conversations import append_message
from agent.models import Confirmation, Message
from agent.tools import checked_once, execute_as, registry, visible_for
from agent.tools.drf import register_viewset
from agent.tools.forms import register_form
from agent.tools.requests import site_host
from agent.turns import history
from tests.babycare import api
from tests.babycare.forms import FeedingForm, WeightForm, WeightNotesForm
from tests.babycare.models import Child, Feeding, Snippet, Tag, Timer, Weight
from tests.support.sessions import login

pytestmark = pytest.mark.django_db
Status = Confirmation.Status
DIARY = ("child", "timer", "feeding", "weight", "snippet", "tag")
DIARY_PERMISSIONS = [f"babycare.{verb}_{model}" for model in DIARY for verb in ("view", "add", "change", "delete")]
VIEWSETS = {
    "child": api.ChildViewSet,
    "timer": api.TimerViewSet,
    "feeding": api.FeedingViewSet,
    "weight": api.WeightViewSet,
    "snippet": api.SnippetViewSet,
}
ROUTES = {"child": "children", "timer": "timers", "feeding": "feedings", "weight": "weights", "snippet": "snippets"}


@pytest.fixture
def user(make_user: Any) -> Any:
    return make_user(*DIARY_PERMISSIONS)


@pytest.fixture(autouse=True)
def diary_writes(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "SESSION_WRITE_MODULES": ["notes", "babycare"]}


@pytest.fixture
def tools() -> Iterator[dict[str, Any]]:
    left_out = dict(registry.left_out)
    made = [tool for basename, viewset in VIEWSETS.items() for tool in register_viewset(viewset, basename=basename)]
    made += [edit_form(WeightForm, "weight"), edit_form(FeedingForm, "feeding")]
    made.append(register_form(WeightForm, name="weight_form_add", module="babycare", description="Add a weight entry."))
    yield {tool.name: tool for tool in made}
    for tool in made:
        registry.unregister(tool.name)
    registry.left_out = left_out  # the HTML-only action this registration left out


def edit_form(form_class: Any, thing: str) -> Any:
    """The site's ModelForm of ``thing`` as a tool that edits one, found by ``<thing>_id``."""
    model = form_class._meta.model
    return register_form(
        form_class,
        name=f"{thing}_form_edit",
        module="babycare",
        permission=f"babycare.change_{thing}",
        description=f"Change a {thing}.",
        instance=lambda ctx, **args: model.objects.get(pk=args[f"{thing}_id"]),
        extra_parameters={f"{thing}_id": {"type": "integer"}},
    )


@pytest.fixture
def emma() -> Child:
    return Child.objects.create(first_name="Emma", slug="emma", birth_date=date(2026, 1, 5))


@pytest.fixture
def timer(user: Any, emma: Child) -> Timer:
    return Timer.objects.create(child=emma, user=user, name="Feeding", start=timezone.now() - timedelta(minutes=20))


def call(ref: Any, chat: Any, name: str, args: dict[str, Any]) -> Any:
    scope = authorize_session(ref, impersonated=False)
    return execute_as(scope, name, args, via="agent", chat=chat, call_id="call_1")


def proposed(ref: Any, chat: Any, name: str, args: dict[str, Any]) -> Confirmation:
    answer = call(ref, chat, name, args)
    assert answer.outcome == "needs_confirmation", answer.result
    return answer.confirmation


def http(client: Any, method: str, url: str, data: Any = None, **query: Any) -> Any:
    """The same request over HTTP, to the host the tool's requests name (absolute links compare)."""
    headers = {"HTTP_ACCEPT": "application/json", "HTTP_HOST": site_host()}
    send = getattr(client, method.lower())
    if data is not None:
        return send(url, json.dumps(data), content_type="application/json", **headers)
    return send(url, query or None, **headers)


# -- nothing happens before Confirm ------------------------------------------------------


def test_a_feeding_proposed_from_a_running_timer_leaves_the_timer_running_until_confirm(ref, chat, tools, timer):
    confirmation = proposed(ref, chat, "feeding_create", {"timer": timer.pk, "method": "bottle"})
    assert Timer.objects.filter(pk=timer.pk).exists()  # validate() stopped it, and that was undone

    with pytest.raises(ValidationError):  # an edit checked, refused by the view: still nothing
        confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"method": "by spoon"})
    assert Timer.objects.filter(pk=timer.pk).exists()

    done = confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"method": "left breast"})

    assert done.status == Status.DONE, done.outcome
    assert not Timer.objects.filter(pk=timer.pk).exists()
    feeding = Feeding.objects.get()
    assert (feeding.method, feeding.start) == ("left breast", timer.start)


def test_cancelling_a_feeding_card_leaves_the_timer_as_it_was(ref, chat, tools, timer):
    confirmation = proposed(ref, chat, "feeding_create", {"timer": timer.pk, "method": "bottle"})

    confirmations.cancel(ref, confirmation.pk, impersonated=False)

    assert Timer.objects.filter(pk=timer.pk).exists() and not Feeding.objects.exists()


def test_a_forms_clean_that_makes_tags_makes_none_before_confirm(ref, chat, tools, emma):
    confirmation = proposed(
        ref,
        chat,
        "weight_form_add",
        {"child": emma.pk, "weight": 3.4, "date": "2026-01-06", "tags": "birth, hospital"},
    )
    assert not Tag.objects.exists()

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE
    assert sorted(Weight.objects.get().tags.values_list("name", flat=True)) == ["birth", "hospital"]


# -- edits keep what the user did not touch ---------------------------------------------


@pytest.fixture
def weighed(emma: Child) -> Weight:
    weight = Weight.objects.create(child=emma, weight=3.2, date=date(2026, 1, 5), notes="At birth")
    weight.tags.set([Tag.objects.create(name="birth"), Tag.objects.create(name="hospital")])
    return weight


def test_a_form_edit_of_one_field_saves_the_many_to_many_tags_as_they_were(ref, chat, tools, weighed):
    confirmation = proposed(ref, chat, "weight_form_edit", {"weight_id": weighed.pk, "weight": 3.3})
    rows = {row["name"]: row for row in confirmation.preview["fields"]}
    assert rows["weight"]["old"] == 3.2 and "tags" not in rows

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False, edits={"weight": 3.25}).status == Status.DONE

    weighed.refresh_from_db()
    assert (weighed.weight, weighed.date, weighed.notes) == (3.25, date(2026, 1, 5), "At birth")
    assert sorted(weighed.tags.values_list("name", flat=True)) == ["birth", "hospital"]
    assert Tag.objects.count() == 2


def test_a_form_edit_keeps_a_many_to_many_field_of_djangos_own(ref, chat, weighed):
    tool = edit_form(WeightNotesForm, "weight")  # the same tool name, another form
    try:
        confirmation = proposed(ref, chat, "weight_form_edit", {"weight_id": weighed.pk, "notes": "Home"})
        assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE
    finally:
        registry.unregister(tool.name)

    weighed.refresh_from_db()
    assert weighed.notes == "Home" and sorted(weighed.tags.values_list("name", flat=True)) == ["birth", "hospital"]


def test_a_form_edit_keeps_choices_dates_and_the_related_object(ref, chat, tools, emma):
    start = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    feeding = Feeding.objects.create(child=emma, start=start, end=start + timedelta(minutes=15), method="bottle")

    confirmation = proposed(ref, chat, "feeding_form_edit", {"feeding_id": feeding.pk, "amount": 120})
    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE

    feeding.refresh_from_db()
    assert (feeding.child, feeding.method, feeding.amount) == (emma, "bottle", 120)
    assert (feeding.start, feeding.end) == (start, start + timedelta(minutes=15))


def test_a_serializer_edit_of_one_field_keeps_the_tags(ref, chat, tools, weighed):
    confirmation = proposed(ref, chat, "weight_partial_update", {"pk": weighed.pk, "notes": "Home"})

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE

    weighed.refresh_from_db()
    assert weighed.notes == "Home" and sorted(weighed.tags.values_list("name", flat=True)) == ["birth", "hospital"]


# -- stale only when the write's data changed ------------------------------------------------


def test_a_card_on_a_timer_whose_duration_ticks_goes_through(ref, chat, tools, timer):
    confirmation = proposed(ref, chat, "timer_partial_update", {"pk": timer.pk, "name": "Nap"})
    Timer.objects.filter(pk=timer.pk).update(start=timer.start)  # touched, its data the same; the clock moves on

    done = confirmations.confirm(ref, confirmation.pk, impersonated=False)

    assert done.status == Status.DONE
    timer.refresh_from_db()
    assert timer.name == "Nap"


def test_a_card_goes_stale_when_a_field_it_would_write_changed(ref, chat, tools, timer):
    confirmation = proposed(ref, chat, "timer_partial_update", {"pk": timer.pk, "name": "Nap"})
    Timer.objects.filter(pk=timer.pk).update(name="Bath")

    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.STALE
    timer.refresh_from_db()
    assert timer.name == "Bath"


def test_fingerprint_fields_choose_what_makes_a_card_stale(ref, chat, timer):
    made = register_viewset(
        api.TimerViewSet, basename="chosen", actions=["partial_update"], fingerprint_fields=["name"]
    )
    try:
        confirmation = proposed(ref, chat, "chosen_partial_update", {"pk": timer.pk, "name": "Nap"})
        Timer.objects.filter(pk=timer.pk).update(start=timezone.now())
        assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE
    finally:
        registry.unregister(made[0].name)


# -- the model learns what a write returned ------------------------------------------------


def next_turns_history(chat: Any) -> list[str]:
    return [entry["content"] for entry in history.load(chat.pk, {"role": "user", "content": "and now?"}, 32_000)]


def test_the_next_turn_reads_what_a_confirmed_create_returned(session, chat, tools, emma):
    client, ref = session
    confirmation = proposed(ref, chat, "snippet_create", {"title": "Hello", "code": "print(1)"})
    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE
    snippet = Snippet.objects.get()

    told = next_turns_history(chat)[-2]

    assert told.startswith("[confirmation] done: snippet_create\nIt returned: ")
    returned = json.loads(told.split("It returned: ", 1)[1])
    assert returned == http(client, "GET", f"/diary/v1/snippets/{snippet.pk}/").json()
    assert returned["url"] == f"http://{site_host()}/diary/v1/snippets/{snippet.pk}/"


def test_the_result_is_told_in_the_next_turn_alone_and_within_the_tools_limit(ref, chat, tools, settings):
    settings.AGENT = {**settings.AGENT, "TOOL_RESULT_CHARS": 60}
    confirmation = proposed(
        ref, chat, "snippet_create", {"title": "Hello", "code": "x" * 20}
    )  # within the limit as a call
    confirmations.confirm(ref, confirmation.pk, impersonated=False)

    told = next_turns_history(chat)[-2]
    assert len(told.split("It returned: ", 1)[1]) == 60

    append_message(chat.pk, role=Message.Role.USER, content="thanks")  # the user wrote since: that turn was told
    assert not any("It returned" in content for content in next_turns_history(chat))


def test_the_next_turn_reads_the_forms_saved_object(ref, chat, tools, emma):
    confirmation = proposed(ref, chat, "weight_form_add", {"child": emma.pk, "weight": 3.4, "date": "2026-01-06"})
    confirmations.confirm(ref, confirmation.pk, impersonated=False)
    weight = Weight.objects.get()

    told = next_turns_history(chat)[-2]

    assert json.loads(told.split("It returned: ", 1)[1]) == {
        "ok": True,
        "id": weight.pk,
        "object": f"Weight {weight.pk}",
    }


# -- the request the router gives ------------------------------------------------------------


@pytest.mark.parametrize(
    "name, args, url, query",
    [
        ("child_list", {"limit": 1}, "/diary/v1/children/", {"limit": 1}),
        ("child_list", {"limit": 1, "offset": 1, "ordering": "-first_name"}, "/diary/v1/children/", None),
        ("child_list", {"first_name": "MM"}, "/diary/v1/children/", None),
        ("child_retrieve", {"slug": "emma"}, "/diary/v1/children/emma/", None),
        ("child_born", {"year": 2026}, "/diary/v1/children/born/2026/", None),
        ("snippet_list", {}, "/diary/v1/snippets/", None),
        ("weight_list", {}, "/diary/v1/weights/", None),
        ("feeding_list", {}, "/diary/v1/feedings/", None),
        ("timer_retrieve", {"pk": "{timer}"}, "/diary/v1/timers/{timer}/", None),
    ],
)
def test_a_read_answers_exactly_as_the_same_users_http_request(
    session, chat, tools, timer, weighed, name, args, url, query
):
    client, ref = session
    Child.objects.create(first_name="Liam", slug="liam", birth_date=date(2025, 3, 1))
    Snippet.objects.create(owner=timer.user, title="One", code="print(1)")
    args = {key: int(value.format(timer=timer.pk)) if value == "{timer}" else value for key, value in args.items()}

    answer = call(ref, chat, name, args)
    sent = {k: v for k, v in args.items() if k not in ("slug", "pk", "year")}  # the rest is in the URL
    response = http(client, "GET", url.format(timer=timer.pk), **sent)

    assert (answer.outcome, response.status_code) == ("ok", 200), answer.result
    if name == "timer_retrieve":  # its duration is the clock's: all else is the same
        answer.result.pop("duration"), response.json().pop("duration")
        assert {k: v for k, v in answer.result.items() if k != "duration"} == {
            k: v for k, v in response.json().items() if k != "duration"
        }
    else:
        assert answer.result == response.json()
    if query:  # the next page's link is the router's path, as HTTP's
        assert answer.result["next"] == f"http://{site_host()}/diary/v1/children/?limit=1&offset=1"


def test_a_version_given_at_registration_is_the_requests_url_version(session, user, chat):
    client, ref = session
    snippet = Snippet.objects.create(owner=user, code="print(2)")
    made = register_viewset(
        api.SnippetViewSet, basename="snippet", actions=["retrieve"], names={"retrieve": "snippet2"}, version="v2"
    )
    try:
        answer = call(ref, chat, "snippet2", {"pk": snippet.pk})
    finally:
        registry.unregister(made[0].name)

    assert answer.result == http(client, "GET", f"/diary/v2/snippets/{snippet.pk}/").json()
    assert answer.result["url"].endswith(f"/diary/v2/snippets/{snippet.pk}/")


# -- only the tools the user may use ---------------------------------------------------------


def test_a_user_with_no_rights_in_the_app_is_offered_none_of_its_tools(make_user, chat, tools, emma):
    stranger = make_user()
    client, ref = login(stranger)
    scope = authorize_session(ref, impersonated=False)

    offered = {tool.name for tool in visible_for(scope)}

    assert not offered & {name for name in tools if not name.startswith(("weight_form", "feeding_form"))}
    for route in ROUTES.values():  # each of them is refused over HTTP too
        assert http(client, "GET", f"/diary/v1/{route}/").status_code == 403


def test_a_reader_is_offered_the_reads_and_not_the_writes(make_user, tools):
    reader = make_user("babycare.view_child")
    _client, ref = login(reader)

    offered = {tool.name for tool in visible_for(authorize_session(ref, impersonated=False))}

    assert {"child_list", "child_retrieve"} <= offered
    assert not offered & {"child_create", "child_update", "child_destroy", "timer_list"}


class NightViewSet(viewsets.GenericViewSet):
    queryset = Child.objects.all()
    serializer_class = api.ChildSerializer

    def list(self, request: Any) -> Response:
        return Response({"detail": "The diary is locked for the night."}, status=409)


def test_a_views_own_refusal_is_told_to_the_model_in_its_words(ref, chat):
    (tool,) = register_viewset(NightViewSet, basename="night", actions=["list"])
    try:
        answer = call(ref, chat, "night_list", {})
    finally:
        registry.unregister(tool.name)

    assert answer.outcome == "denied"
    assert answer.result == {"error": "refused", "message": "The diary is locked for the night.", "status": 409}


class Counted(permissions.BasePermission):
    asked = 0

    def has_permission(self, request: Any, view: Any) -> bool:
        Counted.asked += 1
        return True


class CountedViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Child.objects.all()
    serializer_class = api.ChildSerializer
    permission_classes = [Counted]


def test_the_viewsets_permission_is_asked_once_per_turn_and_a_django_permission_may_be_required(ref, make_user):
    made = register_viewset(CountedViewSet, basename="counted", actions=["list"])
    guarded = register_viewset(CountedViewSet, basename="guarded", actions=["list"], permission="babycare.view_tag")
    try:
        scope = authorize_session(ref, impersonated=False)
        Counted.asked = 0
        with checked_once():
            for _round in range(3):
                assert "counted_list" in {tool.name for tool in visible_for(scope)}
        assert Counted.asked == 2  # one for each tool, not one per round
        _client, other = login(make_user())
        assert "guarded_list" not in {tool.name for tool in visible_for(authorize_session(other, impersonated=False))}
    finally:
        registry.unregister(made[0].name)
        registry.unregister(guarded[0].name)


# -- registration needs no request -------------------------------------------------------------


def test_a_viewset_whose_serializer_class_reads_the_request_gives_each_user_their_own_parameters(
    ref, chat, tools, make_user, timer
):
    staff = make_user(*DIARY_PERMISSIONS, is_staff=True)
    _client, staff_ref = login(staff)
    mine = authorize_session(ref, impersonated=False)
    theirs = authorize_session(staff_ref, impersonated=False)
    tool = tools["feeding_create"]

    assert "amount" not in tool.schema(mine)["properties"]
    assert "amount" in tool.schema(theirs)["properties"]
    assert "amount" in tool.definition(theirs)["function"]["parameters"]["properties"]
    answer = call(ref, chat, "feeding_create", {"timer": timer.pk, "method": "bottle", "amount": 90})
    assert answer.outcome == "invalid_arguments"  # not a field of this user's serializer


# -- schemas a model can read, cards a person can read ------------------------------------------


def test_a_big_choice_is_described_not_listed_and_its_refusal_is_short(ref, chat, tools):
    definition = tools["snippet_create"].definition(authorize_session(ref, impersonated=False))
    language = definition["function"]["parameters"]["properties"]["language"]

    assert "enum" not in language and language["type"] == "string"
    assert "600 values" in language["description"] and "lang000" in language["description"]
    assert len(language["description"]) <= 200
    refused = call(ref, chat, "snippet_create", {"code": "x", "language": "lang-42"})
    assert refused.outcome == "invalid_arguments" and len(json.dumps(refused.result)) < 1_000
    assert "lang042" in refused.result["details"][0]  # the closest values, for the model's next try


def test_the_tutorials_nine_tools_are_small(ref, tools):
    scope = authorize_session(ref, impersonated=False)
    sizes = [  # as the request carries them: compact JSON
        len(json.dumps(tool.definition(scope), separators=(",", ":")))
        for name, tool in tools.items()
        if name.startswith("snippet_")
    ]

    assert len(sizes) == 6 and sum(sizes) / len(sizes) < 700, sizes


def test_a_create_cards_preview_lists_no_hundreds_of_choices(ref, chat, tools):
    confirmation = proposed(
        ref, chat, "snippet_create", {"code": "print(1)", "language": "lang007", "style": "style03"}
    )
    rows = {row["name"]: row for row in confirmation.preview["fields"]}

    assert len(json.dumps(confirmation.preview)) < 2_000
    assert rows["language"]["type"] == "text" and "choices" not in rows["language"]
    assert rows["style"]["type"] == "text" and rows["code"]["type"] == "textarea"


def test_a_delete_cards_preview_is_bounded_whatever_the_object_holds(ref, user, chat, tools):
    snippet = Snippet.objects.create(owner=user, title="Long", code="x = 1\n" * 5_000)

    confirmation = proposed(ref, chat, "snippet_destroy", {"pk": snippet.pk})

    rows = {row["name"]: row for row in confirmation.preview["fields"]}
    assert rows["title"]["value"] == "Long" and rows["code"]["value"].startswith("x = 1\nx = 1")
    assert len(rows["code"]["value"]) == 2_001 and len(json.dumps(confirmation.preview)) < 4_000
    assert confirmations.confirm(ref, confirmation.pk, impersonated=False).status == Status.DONE  # its digest is whole


def test_ordering_filters_and_fields_read_as_the_viewset_allows(ref, tools):
    scope = authorize_session(ref, impersonated=False)
    listing = tools["child_list"].schema(scope)["properties"]

    assert listing["ordering"]["enum"] == ["first_name", "birth_date", "-first_name", "-birth_date"]
    assert listing["first_name"]["description"].endswith("Part of the child's first name.")
    assert {"limit", "offset"} <= set(listing)
    assert "picture" not in tools["snippet_create"].schema(scope)["properties"]
    assert set(tools["timer_restart"].schema(scope)["properties"]) == {"pk"}  # a PATCH with no serializer of its own


def test_descriptions_and_titles_read_as_a_person_would_say_them(tools):
    assert "ViewSet" not in tools["snippet_list"].description
    assert tools["timer_restart"].description == "Start a timer again from now."
    assert str(tools["feeding_create"].title) == "Add feeding"
    assert str(tools["timer_restart"].title) == "Restart (timer)"
    assert str(tools["weight_form_edit"].title) == "Change weight"
    assert str(tools["weight_form_add"].title) == "Add weight"


def test_a_card_names_an_object_without_its_own_str_by_its_name_and_key(ref, chat, tools, emma):
    start = timezone.now() - timedelta(hours=1)
    feeding = Feeding.objects.create(child=emma, start=start, end=start + timedelta(minutes=10), method="bottle")

    confirmation = proposed(ref, chat, "feeding_partial_update", {"pk": feeding.pk, "method": "left breast"})

    assert confirmation.preview["fields"][0] == {
        "name": "pk",
        "label": "Feeding",
        "value": f"Feeding {feeding.pk}",
        "editable": False,
    }


def test_an_html_only_action_is_no_tool_and_the_check_names_it(tools):
    assert "snippet_highlight" not in tools and registry.get("snippet_highlight") is None
    warnings = [w for w in check_tools_left_out() if "SnippetViewSet.highlight" in w.msg]
    assert [w.id for w in warnings] == ["agent.W008"]


def test_a_site_that_crashes_checking_an_edit_leaves_the_card_waiting_and_says_so(session, chat, tools, timer):
    client, ref = session
    confirmation = proposed(ref, chat, "timer_partial_update", {"pk": timer.pk, "name": "Nap"})

    response = client.post(
        f"/assistant/api/confirmations/{confirmation.pk}/confirm/",
        json.dumps({"edits": {"name": "!crash"}}),
        content_type="application/json",
    )

    assert response.status_code == 409 and response.json()["error"] == "tool_failed"
    assert response.json()["message"]
    assert Confirmation.objects.get(pk=confirmation.pk).status == Status.WAITING
    timer.refresh_from_db()
    assert timer.name == "Feeding"
