"""``agent.turns.start`` and ``stop``: the checks in order, the Turn row, the task on commit."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any, Callable

import pytest
from celery.signals import before_task_publish
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation

from agent import turns
from agent.access import SessionRef
from agent.conversations import create_conversation, delete_conversation
from agent.core.errors import (
    Blocked,
    BudgetExceeded,
    Busy,
    Forbidden,
    Impersonated,
    NotConfigured,
    NotFound,
    Refusal,
    SessionGone,
    TooManyTurns,
)
from agent.models import AgentSettings, Endpoint, Lock, OffPurposeFlag, Turn, UserSettings
from agent.turns import locks, monitor
from tests.support.factories import (
    AIRequestFactory,
    ConversationFactory,
    EndpointFactory,
    UserFactory,
    UserSettingsFactory,
)
from tests.support.sessions import grant, login
from tests.support.turns import agent_conf, messages_of

pytestmark = pytest.mark.django_db


def refusal_of(call: Callable[[], Any]) -> str:
    """The code of the refusal (or ``ValidationError`` field) a call raised."""
    try:
        call()
    except Refusal as refusal:
        return refusal.code
    except ValidationError as error:
        return "invalid:" + ",".join(sorted(error.message_dict))
    raise AssertionError("the call was not refused")


def test_the_checks_answer_in_order_each_with_its_code(db: Any) -> None:
    # given: a start that fails every check at once
    user = UserFactory()
    _client, good_ref = login(user)
    chat = ConversationFactory(user=user)
    endpoint = EndpointFactory(name="e", base_url="http://127.0.0.1:9/v1", model="m")
    UserSettingsFactory(user=user, daily_cost_cap=Decimal("0.01"))
    AIRequestFactory(user=user, cost_usd=Decimal(1))
    busy_holder = uuid.uuid4()
    assert locks.take(locks.chat_lock(chat.pk), busy_holder)
    state: dict[str, Any] = {
        "ref": SessionRef(session_key="gone" * 8, user_id=user.pk),
        "chat": uuid.uuid4(),
        "text": "  ",
        "attachments": [uuid.uuid4() for _ in range(6)],
        "impersonated": True,
    }
    others: list[Turn] = []

    def fill_user_slots() -> None:
        for _ in range(3):
            other = ConversationFactory(user=user)
            others.append(turns.start(good_ref, other.pk, "hi", impersonated=False))

    def start() -> Turn:
        return turns.start(
            state["ref"],
            state["chat"],
            state["text"],
            attachment_ids=state["attachments"],
            impersonated=state["impersonated"],
        )

    # when each failure is fixed in turn, the next one answers
    fixes: list[tuple[str, Callable[[], None]]] = [
        ("impersonated", lambda: state.update(impersonated=False)),
        ("session_gone", lambda: state.update(ref=good_ref)),
        ("forbidden", lambda: grant(user, "agent.use_agent")),
        ("not_found", lambda: state.update(chat=chat.pk)),
        ("invalid:content", lambda: state.update(text="hello")),
        ("invalid:attachment_ids", lambda: state.update(attachments=[])),
        ("endpoint_not_configured", lambda: AgentSettings.objects.filter(pk=1).update(default_endpoint=endpoint)),
        ("budget_exceeded", lambda: UserSettings.objects.filter(user=user).update(daily_cost_cap=None)),
        ("busy", lambda: (locks.release_names([locks.chat_lock(chat.pk)], busy_holder), fill_user_slots())),
        ("too_many_turns", lambda: monitor.end_turn(others[0], Turn.Status.STOPPED)),
    ]
    for expected, fix in fixes:
        assert refusal_of(start) == expected
        fix()
    # then: with nothing left to fail, the turn starts
    assert start().status == Turn.Status.QUEUED


def test_impersonated_reads_and_writes_nothing(
    ref: SessionRef, chat: Any, endpoint: Any, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(0), pytest.raises(Impersonated):
        turns.start(ref, chat.pk, "hello", impersonated=True)


def test_impersonated_is_keyword_only_without_default(ref: SessionRef, chat: Any) -> None:
    with pytest.raises(TypeError):
        turns.start(ref, chat.pk, "hello")  # type: ignore[call-arg]


def test_a_session_that_ended_is_session_gone(session: Any, chat: Any, endpoint: Any) -> None:
    client, ref = session
    client.logout()
    with pytest.raises(SessionGone):
        turns.start(ref, chat.pk, "hello", impersonated=False)


def test_a_user_without_use_agent_is_forbidden(db: Any, endpoint: Any) -> None:
    user = UserFactory()
    _client, ref = login(user)
    chat = ConversationFactory(user=user)
    with pytest.raises(Forbidden):
        turns.start(ref, chat.pk, "hello", impersonated=False)


@pytest.mark.parametrize("which", ["someone_elses", "deleted", "missing", "malformed"])
def test_a_chat_that_is_not_the_users_live_one_is_not_found(ref: SessionRef, endpoint: Any, which: str) -> None:
    own = create_conversation(ref, {}, impersonated=False)
    target = {
        "someone_elses": lambda: ConversationFactory().pk,
        "deleted": lambda: delete_conversation(ref, own.pk, impersonated=False).pk,
        "missing": uuid.uuid4,
        "malformed": lambda: "not-a-uuid",
    }[which]()
    with pytest.raises(NotFound):
        turns.start(ref, target, "hello", impersonated=False)
    assert not Turn.objects.exists()


@pytest.mark.parametrize("text", ["", "   \n\t", None, 42])
def test_blank_or_non_text_is_a_validation_error_on_content(
    ref: SessionRef, chat: Any, endpoint: Any, text: Any
) -> None:
    with pytest.raises(ValidationError) as raised:
        turns.start(ref, chat.pk, text, impersonated=False)
    assert "content" in raised.value.message_dict


def test_text_over_history_chars_is_a_validation_error(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    with agent_conf(HISTORY_CHARS=50), pytest.raises(ValidationError) as raised:
        turns.start(ref, chat.pk, "x" * 51, impersonated=False)
    assert "content" in raised.value.message_dict


def test_more_than_max_files_is_a_validation_error(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        turns.start(ref, chat.pk, "hello", attachment_ids=[uuid.uuid4() for _ in range(6)], impersonated=False)
    assert "attachment_ids" in raised.value.message_dict


def test_an_attachment_that_is_not_this_chats_is_not_found(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    with pytest.raises(NotFound):
        turns.start(ref, chat.pk, "hello", attachment_ids=[uuid.uuid4()], impersonated=False)
    assert not Turn.objects.exists()


def test_no_endpoint_is_not_configured(ref: SessionRef, chat: Any) -> None:
    with pytest.raises(NotConfigured) as raised:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    assert raised.value.code == "endpoint_not_configured"


def test_a_disabled_endpoint_is_not_configured(ref: SessionRef, chat: Any, endpoint: Endpoint) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=False)
    with pytest.raises(NotConfigured) as raised:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    assert raised.value.code == "endpoint_not_configured"


def test_a_disabled_personal_endpoint_falls_back_to_the_default(
    ref: SessionRef, user: Any, chat: Any, endpoint: Endpoint
) -> None:
    own = EndpointFactory(name="own", base_url="http://127.0.0.1:9/v1", model="m", enabled=False)
    UserSettingsFactory(user=user, endpoint=own)
    assert turns.start(ref, chat.pk, "hello", impersonated=False).endpoint_id == endpoint.pk


def test_the_budget_refuses_with_the_limit_that_was_hit(ref: SessionRef, user: Any, chat: Any, endpoint: Any) -> None:
    AgentSettings.objects.filter(pk=1).update(daily_cost_per_user=Decimal("0.50"))
    AIRequestFactory(user=user, cost_usd=Decimal(1))
    with pytest.raises(BudgetExceeded) as raised:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    assert raised.value.code == "budget_exceeded" and raised.value.params["limit"] == "cost_per_user"
    assert not Turn.objects.exists() and not Lock.objects.exists()


def test_off_purpose_flags_over_the_limit_block_new_turns(ref: SessionRef, user: Any, chat: Any, endpoint: Any) -> None:
    for _ in range(3):
        OffPurposeFlag.objects.create(user=user, turn_ref=uuid.uuid4(), reason="weather")
    with pytest.raises(Blocked) as raised:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    assert raised.value.code == "off_purpose_blocked"


def test_flags_older_than_a_day_do_not_block(ref: SessionRef, user: Any, chat: Any, endpoint: Any) -> None:
    for _ in range(3):
        OffPurposeFlag.objects.create(user=user, turn_ref=uuid.uuid4(), reason="weather")
    OffPurposeFlag.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert turns.start(ref, chat.pk, "hello", impersonated=False)


def test_a_second_start_in_a_busy_chat_is_busy_and_leaves_no_trace(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    first = turns.start(ref, chat.pk, "one", impersonated=False)
    with pytest.raises(Busy) as raised:
        turns.start(ref, chat.pk, "two", impersonated=False)
    assert raised.value.code == "busy"
    assert list(Turn.objects.values_list("pk", flat=True)) == [first.pk]
    assert set(Lock.objects.values_list("holder", flat=True)) == {first.pk}


def test_a_fourth_turn_of_one_user_is_too_many_and_frees_the_chat(ref: SessionRef, user: Any, endpoint: Any) -> None:
    chats = [create_conversation(ref, {}, impersonated=False) for _ in range(4)]
    for chat in chats[:3]:
        turns.start(ref, chat.pk, "hi", impersonated=False)
    with pytest.raises(TooManyTurns) as raised:
        turns.start(ref, chats[3].pk, "hi", impersonated=False)
    assert raised.value.code == "too_many_turns"
    assert not Lock.objects.filter(name=locks.chat_lock(chats[3].pk)).exists()  # the chat's lock went back
    assert Turn.objects.count() == 3


def test_another_users_turns_do_not_count_against_a_user(ref: SessionRef, make_user: Any, endpoint: Any) -> None:
    for _ in range(3):
        chat = create_conversation(ref, {}, impersonated=False)
        turns.start(ref, chat.pk, "hi", impersonated=False)
    other = make_user()
    _client, other_ref = login(other)
    other_chat = create_conversation(other_ref, {}, impersonated=False)
    assert turns.start(other_ref, other_chat.pk, "hi", impersonated=False)


def test_the_turn_row_is_queued_with_deadline_language_and_session_key(
    ref: SessionRef, user: Any, chat: Any, endpoint: Endpoint
) -> None:
    before = timezone.now()
    with agent_conf(TURN_DEADLINE_S=77), translation.override("ru"):
        turn = turns.start(ref, chat.pk, "hello there", impersonated=False)
    after = timezone.now()
    turn.refresh_from_db()
    assert turn.status == Turn.Status.QUEUED
    assert before + timedelta(seconds=77) <= turn.deadline_at <= after + timedelta(seconds=77)
    assert turn.language == "ru"  # the request's language, the user having none of their own
    assert turn.session_key == ref.session_key
    assert (turn.conversation_id, turn.user_id, turn.endpoint_id, turn.text) == (
        chat.pk,
        user.pk,
        endpoint.pk,
        "hello there",
    )
    assert turn.admission
    assert messages_of(chat) == []  # the user's message is the task's to store


def test_a_start_reads_the_site_settings_once_and_the_users_in_the_check_itself(
    ref: SessionRef, user: Any, chat: Any, endpoint: Endpoint
) -> None:
    UserSettingsFactory(user=user, daily_turns_cap=50)  # a cap of their own, so admission reads their row
    with CaptureQueriesContext(connection) as queries:
        turns.start(ref, chat.pk, "hello", impersonated=False)
    reads = [q["sql"].split(".", 1)[0] for q in queries if q["sql"].startswith('SELECT "')]  # each one's own table
    assert reads.count('SELECT "agent_agentsettings"') == 1
    assert 'SELECT "agent_usersettings"' not in reads  # read with the session in the check's one statement
    assert len(queries) <= 11


def test_the_users_own_language_wins_over_the_requests(ref: SessionRef, user: Any, chat: Any, endpoint: Any) -> None:
    UserSettingsFactory(user=user, language="et")
    with translation.override("ru"):
        assert turns.start(ref, chat.pk, "tere", impersonated=False).language == "et"


def test_the_session_key_is_not_in_the_turns_repr(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    assert ref.session_key not in repr(turn) + str(turn) + repr(ref)


def test_the_task_is_queued_on_commit_with_the_ref_only(
    ref: SessionRef, chat: Any, endpoint: Any, django_capture_on_commit_callbacks: Any
) -> None:
    published: list[dict[str, Any]] = []

    def record(sender: Any = None, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        published.append({"task": sender, "body": body, "headers": headers})

    before_task_publish.connect(record, weak=False)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            turn = turns.start(ref, chat.pk, "a secret text", impersonated=False)
        assert published == []  # nothing leaves before the commit
        for callback in callbacks:
            callback()
    finally:
        before_task_publish.disconnect(record)
    # a stale delivery of this message finds no committed turn to claim: the test's transaction rolls back
    runs = [p for p in published if p["task"] == "agent.run_turn"]
    assert len(runs) == 1
    args, kwargs, _embed = runs[0]["body"]
    assert list(args) == [str(turn.pk)] and kwargs == {}
    sent = repr(runs[0])
    assert ref.session_key not in sent and "a secret text" not in sent
    assert runs[0]["headers"]["timelimit"] == [200, 190]  # soft: the deadline + STOP_GRACE_S; hard: + grace again


def test_the_task_runs_at_most_once() -> None:
    from agent.tasks import run_turn

    assert (run_turn.name, run_turn.acks_late, run_turn.max_retries) == ("agent.run_turn", False, 0)


def test_stop_asks_the_live_turn_and_says_so(ref: SessionRef, chat: Any, endpoint: Any) -> None:
    assert turns.stop(ref, chat.pk, impersonated=False) is False
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    assert turns.stop(ref, chat.pk, impersonated=False) is True
    turn.refresh_from_db()
    assert turn.stop_requested_at is not None
    assert turns.stop(ref, chat.pk, impersonated=False) is False  # already asked


def test_stop_checks_the_session_and_the_chat(ref: SessionRef, endpoint: Any) -> None:
    with pytest.raises(Impersonated):
        turns.stop(ref, uuid.uuid4(), impersonated=True)
    with pytest.raises(NotFound):
        turns.stop(ref, ConversationFactory().pk, impersonated=False)
