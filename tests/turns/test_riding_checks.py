"""The step checks that ride in the statement of a store: the answer is stored only if the check
after the model call passes, and a result's store reads the check before the next call."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models.signals import post_save
from django.test.utils import CaptureQueriesContext

from agent import turns
from agent.access import statement
from agent.conversations import create_conversation
from agent.models import AgentSettings, AIRequest, Message, UserSettings
from agent.tasks import run_turn
from tests.support.model_server import answer, tool_calls
from tests.support.sessions import login
from tests.support.turns import messages_of

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "an answer the model wrote while the change happened"


def _logout(session: Any, user: Any) -> None:
    session[0].logout()


def _change_password(session: Any, user: Any) -> None:
    user.set_password("a-new-password")
    user.save()


def _deactivate(session: Any, user: Any) -> None:
    type(user).objects.filter(pk=user.pk).update(is_active=False)


def _lose_use_agent(session: Any, user: Any) -> None:
    Permission.objects.get(codename="use_agent").user_set.remove(user)


def _switch_user_off(session: Any, user: Any) -> None:
    UserSettings.objects.update_or_create(user=user, defaults={"enabled": False})


def _switch_site_off(session: Any, user: Any) -> None:
    AgentSettings.objects.filter(pk=1).update(enabled=False)


def _mark_impersonated(session: Any, user: Any) -> None:
    store = session[0].session
    store["hijack_history"] = ["1"]
    store.save()


@contextlib.contextmanager
def _on_the_answers_journal_row(action: Callable[[], Any]) -> Iterator[None]:
    """Run ``action`` once, in the turn's thread, when the model call's journal row is stored."""
    done: list[bool] = []

    def receiver(sender: Any, instance: AIRequest, created: bool, **kwargs: Any) -> None:
        if created and not done:
            done.append(True)
            action()

    post_save.connect(receiver, sender=AIRequest, weak=False, dispatch_uid="riding-checks")
    try:
        yield
    finally:
        post_save.disconnect(sender=AIRequest, dispatch_uid="riding-checks")
    assert done, "the model call stored no journal row"


def _during_the_model_call(model_server: Any, action: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=lambda: model_server.received.wait(10) and action())
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("revoke", "reason"),
    [
        (_logout, "session_ended"),
        (_change_password, "session_ended"),
        (_deactivate, "session_ended"),
        (_mark_impersonated, "session_ended"),
        (_lose_use_agent, "forbidden"),
        (_switch_user_off, "forbidden"),
        (_switch_site_off, "forbidden"),
    ],
    ids=["logout", "password", "deactivated", "impersonated", "permission", "user-off", "site-off"],
)
def test_an_answer_written_after_a_revocation_is_not_stored(
    session, chat, user, endpoint, model_server, revoke, reason
):
    # given a revocation the moment the model's answer is in (its journal row is written), after
    # every check made while the model wrote
    model_server.push(answer(ANSWER))
    with _on_the_answers_journal_row(lambda: revoke(session, user)):
        # when the turn runs
        turn = turns.start(session[1], chat.pk, "hello", impersonated=False)
        run_turn(str(turn.pk))
    # then it ends for the revocation, and what the model wrote is nowhere in the chat
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("failed", reason)
    assert not Message.objects.filter(conversation=chat, content=ANSWER).exists()
    assert [m.role for m in messages_of(chat)] == ["user", "notice"]


def test_a_session_saved_during_the_model_call_still_gets_its_answer(session, chat, user, endpoint, model_server):
    # given a session the site saves while the model writes (its stored data changes, it stays live)
    def save_the_session() -> None:
        store = session[0].session
        store["theme"] = "dark"
        store.save()

    model_server.push(tool_calls(("notes_search", {"query": "milk"}), delay=1), answer(ANSWER))
    timer = _during_the_model_call(model_server, save_the_session)
    # when the turn runs
    turn = turns.start(session[1], chat.pk, "find milk", impersonated=False)
    run_turn(str(turn.pk))
    timer.join()
    # then the answer, its tool call and the final answer are stored, each once
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("finished", "")
    assert [(m.role, m.tool_outcome) for m in messages_of(chat)] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "ok"),
        ("assistant", ""),
    ]
    assert messages_of(chat)[-1].content == ANSWER


def test_a_round_with_two_calls_checks_once_alone_and_twice_with_its_stores(ref, chat, user, endpoint, model_server):
    # given two rounds of two reads each, then the answer
    reads = (("notes_search", {"query": "milk"}), ("notes_search", {"query": "bread"}))
    model_server.push(tool_calls(*reads), tool_calls(*reads), answer("done"))
    turn = turns.start(ref, chat.pk, "find milk and bread", impersonated=False)
    # when the turn runs
    with CaptureQueriesContext(connection) as queries:
        run_turn(str(turn.pk))
    # then each round checks alone once (before its model call); the check after the model call
    # rides with the answer's store and the check before the second call with the first's result
    statements = [q["sql"] for q in queries.captured_queries]
    alone = [sql for sql in statements if sql.startswith("SELECT") and "agent_leases" in sql]
    riding = [sql for sql in statements if sql.startswith("WITH agent_check")]
    plain_stores = [sql for sql in statements if sql.startswith("WITH agent_fence")]  # the user's message, last results
    assert (len(alone), len(riding), len(plain_stores)) == (3, 5, 3)
    assert [m.tool_outcome for m in messages_of(chat) if m.role == Message.Role.TOOL] == ["ok"] * 4


def test_a_stop_asked_the_moment_the_answer_is_in_keeps_it_as_partial(ref, chat, user, endpoint, model_server):
    model_server.push(answer(ANSWER))
    with _on_the_answers_journal_row(lambda: turns.stop(ref, chat.pk, impersonated=False)):
        turn = turns.start(ref, chat.pk, "hello", impersonated=False)
        run_turn(str(turn.pk))
    turn.refresh_from_db()
    assert turn.status == "stopped"
    kept = Message.objects.get(conversation=chat, role=Message.Role.ASSISTANT)
    assert (kept.content, kept.partial) == (ANSWER, True)


_refusing: list[bool] = []


def refuse_when_asked(user: Any, data: dict[str, Any]) -> str | None:
    """A site's own scope check (``SCOPE_CHECKS``) that refuses once the test says so."""
    return "not_now" if _refusing else None


def test_a_site_scope_check_is_asked_before_the_answer_is_stored(ref, chat, user, endpoint, model_server, settings):
    # given a site check of its own, which needs Python at every step, and starts refusing the
    # moment the model's answer is in
    settings.AGENT = {**settings.AGENT, "SCOPE_CHECKS": [f"{__name__}.refuse_when_asked"]}
    model_server.push(answer(ANSWER))
    try:
        with _on_the_answers_journal_row(lambda: _refusing.append(True)):
            turn = turns.start(ref, chat.pk, "hello", impersonated=False)
            with CaptureQueriesContext(connection) as queries:
                run_turn(str(turn.pk))
    finally:
        _refusing.clear()
    # then the answer was not stored: the check ran alone, not as a gate in SQL
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("failed", "session_ended")
    assert not Message.objects.filter(conversation=chat, content=ANSWER).exists()
    assert not [q for q in queries.captured_queries if "agent_gate AS" in q["sql"]]


def test_a_site_with_many_checked_permissions_still_gets_its_answers(
    ref, chat, user, endpoint, model_server, monkeypatch
):
    # given a site whose tools have the scope read 40 permissions more (bits past 31 in one mask)
    many = {*statement._READ_WITH_SCOPE, *(f"elsewhere.right_{n:02d}" for n in range(40))}
    monkeypatch.setattr(statement, "_READ_WITH_SCOPE", many)
    model_server.push(answer(ANSWER))
    # when a turn runs
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    run_turn(str(turn.pk))
    # then its answer is stored through the gate
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("finished", "")
    assert Message.objects.filter(conversation=chat, content=ANSWER).exists()


def test_a_session_hash_of_the_sites_own_is_checked_before_the_answer_is_stored(
    user, endpoint, model_server, monkeypatch
):
    # given a user model whose session hash covers more than the password (a "log out everywhere"
    # stamp), and a session signed in under it
    model = type(user)
    djangos = model.get_session_auth_hash
    monkeypatch.setattr(model, "get_session_auth_hash", lambda self: f"{djangos(self)}|{self.last_name}")
    _client, ref = login(user)
    chat = create_conversation(ref, {}, impersonated=False)
    model_server.push(answer(ANSWER))
    # when the stamp changes the moment the model's answer is in
    with _on_the_answers_journal_row(lambda: model.objects.filter(pk=user.pk).update(last_name="everywhere")):
        turn = turns.start(ref, chat.pk, "hello", impersonated=False)
        run_turn(str(turn.pk))
    # then the session counts as ended: nothing of the answer is stored
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("failed", "session_ended")
    assert not Message.objects.filter(conversation=chat, content=ANSWER).exists()


_operator_took_over: list[bool] = []


def operator_detector(request_or_scope: Any) -> bool:
    """A site's own impersonation detector that reads something besides the session's data."""
    return bool(_operator_took_over)


def test_a_detector_of_the_sites_own_is_asked_before_the_answer_is_stored(
    ref, chat, user, endpoint, model_server, settings
):
    settings.AGENT = {**settings.AGENT, "IMPERSONATION_DETECTOR": f"{__name__}.operator_detector"}
    model_server.push(answer(ANSWER))
    try:
        with _on_the_answers_journal_row(lambda: _operator_took_over.append(True)):
            turn = turns.start(ref, chat.pk, "hello", impersonated=False)
            run_turn(str(turn.pk))
    finally:
        _operator_took_over.clear()
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("failed", "session_ended")
    assert not Message.objects.filter(conversation=chat, content=ANSWER).exists()
