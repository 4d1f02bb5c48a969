"""Versions of a chat: edit a message, answer one again, switch between the versions."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from agent import turns
from agent.conversations import get_conversation, get_message, list_messages
from agent.core.errors import Busy, Impersonated, NotFound
from agent.core.events import topic
from agent.models import Attachment, Message, Turn
from agent.tasks import run_turn
from agent.turns import history
from tests.support.model_server import answer, error
from tests.support.sessions import login

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def storage_root(settings: Any, tmp_path: Path) -> Path:
    root = tmp_path / "media"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(root)}},
    }
    return root


def ask(ref: Any, chat: Any, text: str, **kwargs: Any) -> Turn:
    turn = turns.start(ref, chat.pk, text, impersonated=False, **kwargs)
    run_turn(str(turn.pk))
    return turn


def line(ref: Any, chat: Any) -> list[tuple[str, str]]:
    """The active line as a client sees it: (role, content or notice code)."""
    view = get_conversation(ref, chat.pk, impersonated=False)
    return [(m["role"], m["content"] or m["notice_code"] or "") for m in view["messages"]]


def ready_file(ref: Any, chat: Any, text: str) -> Attachment:
    return Attachment.objects.create(
        user_id=ref.user_id,
        conversation=chat,
        name=f"{text}.txt",
        content_type="text/plain",
        size=len(text),
        file=ContentFile(text.encode(), name=f"{text}.txt"),
        status=Attachment.Status.READY,
        text=text,
    )


@pytest.fixture
def two_rounds(ref: Any, chat: Any, endpoint: Any, model_server: Any) -> list[Message]:
    """A chat of two questions answered: the stored rows, oldest first."""
    model_server.push(answer("Cats purr."), answer("Dogs bark."))
    ask(ref, chat, "cats?")
    ask(ref, chat, "dogs?")
    return list(Message.objects.filter(conversation=chat).order_by("seq"))


# -- the tree ---------------------------------------------------------------------


def test_messages_stored_on_the_line_link_to_the_one_before(ref, chat, two_rounds):
    parents = [m.parent_id for m in two_rounds]
    assert parents == [None, two_rounds[0].pk, two_rounds[1].pk, two_rounds[2].pk]
    assert all(m.active for m in two_rounds)
    chat.refresh_from_db()
    assert chat.line_end == two_rounds[-1].pk and not chat.has_versions


def test_a_message_on_the_line_costs_no_extra_statement(ref, chat, two_rounds):
    from agent.conversations import append_message

    with CaptureQueriesContext(connection) as queries:
        append_message(chat.pk, role=Message.Role.NOTICE, notice_code="stopped")
    assert len(queries) == 1


# -- regenerate ------------------------------------------------------------------------


def test_regenerate_answers_the_same_message_again_as_a_sibling(ref, chat, two_rounds, model_server):
    cats, purr, dogs, bark = two_rounds
    model_server.push(answer("Dogs woof."))

    turn = turns.regenerate(ref, chat.pk, bark.pk, impersonated=False)
    run_turn(str(turn.pk))

    assert line(ref, chat) == [
        ("user", "cats?"),
        ("assistant", "Cats purr."),
        ("user", "dogs?"),
        ("assistant", "Dogs woof."),
    ]
    assert Message.objects.filter(conversation=chat, role="user").count() == 2  # no second "dogs?"
    woof = Message.objects.get(conversation=chat, content="Dogs woof.")
    assert woof.parent_id == dogs.pk and Turn.objects.get(pk=turn.pk).user_message_id == dogs.pk
    sent = model_server.requests[-1]["messages"]
    assert [m["content"] for m in sent[1:]] == ["cats?", "Cats purr.", "dogs?"]


def test_regenerate_of_an_earlier_answer_takes_what_followed_off_the_line(ref, chat, two_rounds, model_server):
    cats, purr, dogs, bark = two_rounds
    model_server.push(answer("Cats sleep."))
    run_turn(str(turns.regenerate(ref, chat.pk, purr.pk, impersonated=False).pk))
    assert line(ref, chat) == [("user", "cats?"), ("assistant", "Cats sleep.")]
    assert list(Message.objects.filter(conversation=chat, active=False).order_by("seq")) == [purr, dogs, bark]


def test_regenerate_after_a_failed_call_answers_the_message_with_its_files(ref, chat, endpoint, model_server):
    # given a message with a file whose answer failed
    file = ready_file(ref, chat, "tables")
    model_server.push(error(500), answer("Two tables."))
    ask(ref, chat, "how many?", attachment_ids=[file.pk])
    notice = Message.objects.get(conversation=chat, role="notice")

    # when the failure is regenerated
    run_turn(str(turns.regenerate(ref, chat.pk, notice.pk, impersonated=False).pk))

    # then the same message (text and file) is answered, not stored again
    assert line(ref, chat) == [("user", "how many?"), ("assistant", "Two tables.")]
    assert "[file: tables.txt]" in model_server.requests[-1]["messages"][-1]["content"]
    assert Attachment.objects.filter(conversation=chat).count() == 1


def test_regenerate_of_a_user_message_is_not_found(ref, chat, two_rounds):
    with pytest.raises(NotFound):
        turns.regenerate(ref, chat.pk, two_rounds[0].pk, impersonated=False)


def test_regenerate_impersonated_is_refused_before_anything(ref, chat, two_rounds, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(Impersonated):
        turns.regenerate(ref, chat.pk, two_rounds[1].pk, impersonated=True)


def test_regenerate_of_another_users_message_is_not_found(ref, chat, two_rounds, make_user):
    _client, other = login(make_user())
    with pytest.raises(NotFound):
        turns.regenerate(other, chat.pk, two_rounds[1].pk, impersonated=False)


def test_regenerate_while_a_turn_runs_is_busy(ref, chat, two_rounds):
    turns.start(ref, chat.pk, "and birds?", impersonated=False)  # queued, not run
    with pytest.raises(Busy):
        turns.regenerate(ref, chat.pk, two_rounds[1].pk, impersonated=False)
    assert Message.objects.filter(conversation=chat, active=False).count() == 0


def test_two_regenerates_at_once_start_one_turn(ref, chat, two_rounds):
    # given two requests to answer the same message again, at the same moment
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def regenerate() -> None:
        try:
            barrier.wait()
            turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False)
            outcomes.append("started")
        except Busy:
            outcomes.append("busy")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=regenerate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # then one turn starts, the other is refused, and the line moved once
    assert sorted(outcomes) == ["busy", "started"]
    assert Turn.objects.filter(conversation=chat, user_message=two_rounds[2], status="queued").count() == 1
    assert list(Message.objects.filter(conversation=chat, active=False)) == [two_rounds[3]]


# -- edit ---------------------------------------------------------------------------------


def test_edit_makes_a_new_version_of_the_message_and_answers_it(ref, chat, two_rounds, model_server):
    cats, purr, dogs, bark = two_rounds
    model_server.push(answer("Cats nap."))

    run_turn(str(turns.edit_message(ref, chat.pk, cats.pk, "kittens?", impersonated=False).pk))

    assert line(ref, chat) == [("user", "kittens?"), ("assistant", "Cats nap.")]
    kittens = Message.objects.get(conversation=chat, content="kittens?")
    assert kittens.parent_id is None and kittens.active
    assert model_server.requests[-1]["messages"][1:] == [{"role": "user", "content": "kittens?"}]
    views = get_conversation(ref, chat.pk, impersonated=False)["messages"]
    assert views[0]["versions"] == {"index": 2, "count": 2, "siblings": [str(cats.pk), str(kittens.pk)]}
    assert views[1]["versions"] is None


def test_edit_keeps_the_original_files_unless_given_others(ref, chat, endpoint, model_server, storage_root):
    # given a message sent with a file
    first = ready_file(ref, chat, "plan")
    model_server.push(answer("A plan."), answer("Same plan."), answer("New notes."))
    ask(ref, chat, "read this", attachment_ids=[first.pk])
    asked = Message.objects.get(conversation=chat, role="user")

    # when it is edited without files, then with another one
    run_turn(str(turns.edit_message(ref, chat.pk, asked.pk, "read it again", impersonated=False).pk))
    again = Message.objects.get(conversation=chat, content="read it again")
    other = ready_file(ref, chat, "notes")
    run_turn(
        str(turns.edit_message(ref, chat.pk, again.pk, "and this", attachment_ids=[other.pk], impersonated=False).pk)
    )

    # then the first version kept its file, the second shares it, the third has only the new one
    names = lambda m: sorted(Attachment.objects.filter(message=m).values_list("name", flat=True))  # noqa: E731
    assert names(asked) == ["plan.txt"] and names(again) == ["plan.txt"]
    assert names(Message.objects.get(content="and this")) == ["notes.txt"]
    assert "[file: plan.txt]" in model_server.requests[1]["messages"][-1]["content"]
    # and removing the copy's row leaves the file the original still names
    Attachment.objects.filter(message=again).delete()
    assert Attachment.objects.get(message=asked).file.storage.exists(first.file.name)


def test_edit_of_an_answer_is_not_found(ref, chat, two_rounds):
    with pytest.raises(NotFound):
        turns.edit_message(ref, chat.pk, two_rounds[1].pk, "no", impersonated=False)


def test_edit_of_a_message_off_the_line_is_not_found(ref, chat, two_rounds, model_server):
    model_server.push(answer("Cats nap."))
    run_turn(str(turns.edit_message(ref, chat.pk, two_rounds[0].pk, "kittens?", impersonated=False).pk))
    with pytest.raises(NotFound):
        turns.edit_message(ref, chat.pk, two_rounds[2].pk, "birds?", impersonated=False)


def test_edit_of_another_users_message_is_not_found(ref, chat, two_rounds, make_user):
    _client, other = login(make_user())
    with pytest.raises(NotFound):
        turns.edit_message(other, chat.pk, two_rounds[0].pk, "mine", impersonated=False)


def test_edit_impersonated_is_refused(ref, chat, two_rounds):
    with pytest.raises(Impersonated):
        turns.edit_message(ref, chat.pk, two_rounds[0].pk, "x", impersonated=True)


def test_edit_while_a_turn_runs_is_busy_and_moves_nothing(ref, chat, two_rounds):
    turns.start(ref, chat.pk, "and birds?", impersonated=False)  # queued, not run
    with pytest.raises(Busy):
        turns.edit_message(ref, chat.pk, two_rounds[0].pk, "kittens?", impersonated=False)
    assert Message.objects.filter(conversation=chat, active=False).count() == 0
    chat.refresh_from_db()
    assert chat.line_end == two_rounds[-1].pk and not chat.has_versions


def test_edit_with_a_blank_text_changes_nothing(ref, chat, two_rounds):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        turns.edit_message(ref, chat.pk, two_rounds[0].pk, "  ", impersonated=False)
    assert Message.objects.filter(conversation=chat, active=False).count() == 0


# -- switch ----------------------------------------------------------------------------------


def test_switching_back_and_forth_restores_the_exact_lines(ref, chat, two_rounds, model_server):
    # given a chat whose first message has two versions, each with its own line after it
    cats = two_rounds[0]
    model_server.push(answer("Cats nap."), answer("Kittens play."))
    run_turn(str(turns.edit_message(ref, chat.pk, cats.pk, "kittens?", impersonated=False).pk))
    ask(ref, chat, "more?")
    second = line(ref, chat)
    kittens = Message.objects.get(conversation=chat, content="kittens?")

    # when the first version is shown again, then the second
    assert turns.switch_version(ref, chat.pk, cats.pk, impersonated=False)
    first = line(ref, chat)
    assert turns.switch_version(ref, chat.pk, kittens.pk, impersonated=False)

    # then each comes back with the messages it had
    assert first == [("user", "cats?"), ("assistant", "Cats purr."), ("user", "dogs?"), ("assistant", "Dogs bark.")]
    assert (
        line(ref, chat)
        == second
        == [
            ("user", "kittens?"),
            ("assistant", "Cats nap."),
            ("user", "more?"),
            ("assistant", "Kittens play."),
        ]
    )
    chat.refresh_from_db()
    assert chat.line_end == Message.objects.get(content="Kittens play.").pk
    assert chat.message_count == Message.objects.filter(conversation=chat).count()


def test_a_message_stored_after_a_switch_continues_the_line_shown(ref, chat, two_rounds, model_server):
    model_server.push(answer("Dogs woof."), answer("Birds sing."))
    run_turn(str(turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False).pk))
    turns.switch_version(ref, chat.pk, two_rounds[3].pk, impersonated=False)
    ask(ref, chat, "birds?")
    assert line(ref, chat)[-3:] == [("assistant", "Dogs bark."), ("user", "birds?"), ("assistant", "Birds sing.")]
    assert Message.objects.get(content="birds?").parent_id == two_rounds[3].pk


def test_switch_while_a_turn_runs_is_busy(ref, chat, two_rounds, model_server):
    model_server.push(answer("Dogs woof."))
    run_turn(str(turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False).pk))
    turns.start(ref, chat.pk, "and birds?", impersonated=False)
    with pytest.raises(Busy):
        turns.switch_version(ref, chat.pk, two_rounds[3].pk, impersonated=False)
    assert not Message.objects.get(pk=two_rounds[3].pk).active


def test_switch_to_a_message_of_another_chat_is_not_found(ref, chat, two_rounds):
    from agent.conversations import create_conversation

    other = create_conversation(ref, {}, impersonated=False)
    with pytest.raises(NotFound):
        turns.switch_version(ref, other.pk, two_rounds[0].pk, impersonated=False)


def test_switch_impersonated_is_refused(ref, chat, two_rounds):
    with pytest.raises(Impersonated):
        turns.switch_version(ref, chat.pk, two_rounds[0].pk, impersonated=True)


def test_switch_to_the_line_shown_changes_nothing(ref, chat, two_rounds):
    assert not turns.switch_version(ref, chat.pk, two_rounds[1].pk, impersonated=False)


def test_a_switch_moves_the_line_in_a_few_statements_whatever_the_chat_length(ref, chat, two_rounds, model_server):
    model_server.push(answer("Dogs woof."))
    run_turn(str(turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False).pk))
    with CaptureQueriesContext(connection) as queries:
        turns.switch_version(ref, chat.pk, two_rounds[3].pk, impersonated=False)
    writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("UPDATE", "WITH"))]
    assert len(writes) <= 4  # the ancestors read, the line left, the line joined, the chat's end


# -- what clients and history see ---------------------------------------------------------------


def test_clients_see_the_active_line_and_an_off_line_message_by_its_id(ref, chat, two_rounds, model_server):
    model_server.push(answer("Dogs woof."))
    run_turn(str(turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False).pk))
    woof = Message.objects.get(content="Dogs woof.")

    page = list_messages(ref, chat.pk, impersonated=False, latest=True)
    assert [m["content"] for m in page] == ["cats?", "Cats purr.", "dogs?", "Dogs woof."]
    assert [m["seq"] for m in page] == sorted(m["seq"] for m in page)
    assert page[-1]["versions"] == {"index": 2, "count": 2, "siblings": [str(two_rounds[3].pk), str(woof.pk)]}
    assert all(m["active"] for m in page)
    older = list_messages(ref, chat.pk, impersonated=False, before=woof.pk, limit=2)
    assert [m["content"] for m in older] == ["Cats purr.", "dogs?"]
    after = list_messages(ref, chat.pk, impersonated=False, after=two_rounds[1].pk)
    assert [m["content"] for m in after] == ["dogs?", "Dogs woof."]

    bark = get_message(ref, chat.pk, two_rounds[3].pk, impersonated=False)
    assert bark["active"] is False and bark["versions"]["index"] == 1


def test_history_reads_the_active_line_only(ref, chat, two_rounds, model_server):
    model_server.push(answer("Dogs woof."))
    run_turn(str(turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False).pk))
    loaded = history.load(chat.pk, {"role": "user", "content": "next"}, 10_000)
    assert [m["content"] for m in loaded] == ["cats?", "Cats purr.", "dogs?", "Dogs woof.", "next"]


@pytest.mark.parametrize("door", ["edit", "regenerate", "switch"])
def test_each_door_tells_open_tabs_the_line_changed_with_uuids_only(
    ref, chat, two_rounds, model_server, capture_events, door
):
    # given a chat (and, for a switch, a second version to switch to)
    if door == "switch":
        model_server.push(answer("Dogs woof."))
        run_turn(str(turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False).pk))
    capture_events.clear()

    # when the door is used
    if door == "edit":
        turns.edit_message(ref, chat.pk, two_rounds[2].pk, "birds?", impersonated=False)
    elif door == "regenerate":
        turns.regenerate(ref, chat.pk, two_rounds[3].pk, impersonated=False)
    else:
        turns.switch_version(ref, chat.pk, two_rounds[3].pk, impersonated=False)

    # then the chat's tabs are told that the line changed, and nothing of its content
    told = [event for group, event in capture_events if group == topic(chat.pk)]
    assert {"type": "agent.line_changed", "conversation": str(chat.pk)} in told
