"""Shared fixtures: users with live sessions, chats, and a scripted model server."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from django.test import Client

from agent.access import Scope, SessionRef, authorize_session
from agent.conversations import create_conversation
from agent.models import AgentSettings, Conversation, Endpoint
from agent.tools import agent_tool, registry
from tests.support.factories import EndpointFactory, UserFactory
from tests.support.model_server import ScriptedModelServer
from tests.support.sessions import grant, login
from tests.support.workers import thread_worker


@pytest.fixture
def make_user(db: Any) -> Callable[..., Any]:
    def make(*permissions: str, **fields: Any) -> Any:
        user = UserFactory(**fields)
        return grant(user, "agent.use_agent", *permissions)

    return make


@pytest.fixture
def user(make_user: Callable[..., Any]) -> Any:
    return make_user("notes.view_note", "notes.add_note", "notes.change_note")


@pytest.fixture
def session(user: Any) -> tuple[Client, SessionRef]:
    return login(user)


@pytest.fixture
def ref(session: tuple[Client, SessionRef]) -> SessionRef:
    return session[1]


@pytest.fixture
def scope(ref: SessionRef) -> Scope:
    return authorize_session(ref, impersonated=False)


@pytest.fixture
def chat(ref: SessionRef) -> Conversation:
    """An empty chat of the signed-in ``user``, made through the chats API."""
    return create_conversation(ref, {}, impersonated=False)


@pytest.fixture
def declare() -> Iterator[Callable[..., Any]]:
    """``declare(func, name=..., ...)``: register a tool for this test only."""
    names: list[str] = []

    def register(func: Callable[..., Any], **declaration: Any) -> Any:
        declaration.setdefault("description", "A tool of the tests.")
        declared = agent_tool(**declaration)(func)
        names.append(declaration["name"])  # only now: a refused declaration must not remove a site's tool
        return declared

    yield register
    for name in names:
        registry.unregister(name)


@pytest.fixture
def model_server() -> Any:
    server = ScriptedModelServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def endpoint(db: Any, model_server: ScriptedModelServer) -> Endpoint:
    """The site's default endpoint, pointed at the scripted server."""
    row = EndpointFactory(
        name="scripted",
        base_url=model_server.base_url,
        api_key="sk-test-secret",
        model="scripted-model",
        input_price_per_mtok=2,
        output_price_per_mtok=8,
        timeout_s=5,
    )
    settings_row = AgentSettings.current()
    settings_row.default_endpoint = row
    settings_row.save()
    return row


@pytest.fixture
def speech(db: Any, model_server: ScriptedModelServer) -> Endpoint:
    """The site's speech endpoint, on the scripted server."""
    row = EndpointFactory(
        name="speech",
        base_url=model_server.base_url,
        api_key="sk-speech",
        model="whisper-1",
        supports_transcription=True,
        audio_price_per_minute=Decimal("0.006"),
        timeout_s=5,
    )
    site = AgentSettings.current()
    site.speech_endpoint = row
    site.save()
    return row


@pytest.fixture(scope="module")
def worker(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Any]:
    """A Celery worker (two threads) on the test queue, for one module's tests."""
    from django.conf import settings

    from tests.celery_app import app

    with django_db_blocker.unblock():
        with app.connection_for_write() as conn:  # turns queued by earlier tests, for rows long gone
            conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)
        with thread_worker() as started:
            yield started


@pytest.fixture(scope="session", autouse=True)
def _empty_test_queue() -> None:
    """Turns queued by earlier runs must not reach this run's workers."""
    from tests.celery_app import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(app.conf.task_default_queue)


@pytest.fixture
def capture_events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The events the app sends to channel groups during the test, as ``(group, event)`` in the order they
    leave (an event sent on commit leaves when its transaction commits); each is still sent to the layer.
    A test reads them here at once instead of listening on Redis with a timeout."""
    from agent.core import events

    sent: list[tuple[str, dict[str, Any]]] = []
    send = events._send_rollback_unsafe  # every event leaves through it, on commit or (a draft) at once

    def record(group: str, event: dict[str, Any]) -> None:
        sent.append((group, event))
        send(group, event)

    monkeypatch.setattr(events, "_send_rollback_unsafe", record)
    return sent


@pytest.fixture(autouse=True)
def _english() -> Any:
    """Each test starts in English, whatever an earlier one activated in this thread."""
    from django.utils import translation

    with translation.override("en"):
        yield


POOLED = (
    "turns/",
    "attachments/",
    "admin/",
    "test_admin.py",
    "hosts/",  # two hosts, their files in S3, their database through the pooler
    "faults/test_worker_crash.py",
    "faults/test_lost_turn.py",
)
"""Where the tests that ``.ci/pooler`` runs behind PgBouncer on Django 5.2 live: each of them that touches the
database."""
NOT_POOLED = (
    "attachments/test_extraction.py",  # the parsers' own time; the statements around them are the API's
    "faults/test_worker_crash.py::test_a_killed_worker_frees_the_chat_and_every_tab_is_told[child-tool]",
    "faults/test_worker_crash.py::test_a_killed_worker_frees_the_chat_and_every_tab_is_told[group-model]",
)  # a child killed mid model call and a whole worker mid tool stay: the other two run the same statements
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup"}


SERIAL = ("browser", "faults", "hosts", "install")
"""Markers of the tests that must not run beside each other: they kill workers, restart Redis, start whole
stacks of processes, or time what a loaded machine does. Under ``--dist loadgroup`` they all go to one worker."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    """Mark ``pooled`` the tests under ``POOLED`` that touch the database, and put the ``SERIAL`` ones in a group."""
    tests = Path(__file__).resolve().parent
    for item in items:
        if any(item.get_closest_marker(name) for name in SERIAL):
            item.add_marker(pytest.mark.xdist_group("serial"))
        where = f"{item.path.resolve().relative_to(tests).as_posix()}::{item.name}"
        touches = item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        if where.startswith(POOLED) and not where.startswith(NOT_POOLED) and touches:
            item.add_marker(pytest.mark.pooled)
