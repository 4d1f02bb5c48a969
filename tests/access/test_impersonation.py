"""``agent.access.is_impersonated`` on requests and Channels scopes."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import RequestFactory, override_settings

from agent.access import is_impersonated

pytestmark = pytest.mark.django_db


def flagged_by_header(request_or_scope: Any) -> bool:
    """A site's own detector: its support tool marks requests with a header."""
    if isinstance(request_or_scope, dict):
        return (b"x-support", b"1") in request_or_scope.get("headers", [])
    return request_or_scope.headers.get("X-Support") == "1"


def session_with(**data: Any) -> Any:
    store = import_module(django_settings.SESSION_ENGINE).SessionStore()
    store.update(data)
    store.save()
    return store


def request_with(session: Any, headers: dict[str, str] | None = None) -> Any:
    request = RequestFactory().get("/", headers=headers or {})
    request.session = session
    return request


def agent_with(**overrides: Any) -> dict[str, Any]:
    return {**django_settings.AGENT, **overrides}


def test_a_request_whose_session_holds_hijack_history_is_impersonated() -> None:
    assert is_impersonated(request_with(session_with(hijack_history=["1"])))


def test_a_scope_whose_session_holds_hijack_history_is_impersonated() -> None:
    assert is_impersonated({"type": "websocket", "session": session_with(hijack_history=["1"])})


def test_a_request_of_an_ordinary_session_is_not_impersonated() -> None:
    assert not is_impersonated(request_with(session_with(other="x")))


def test_a_scope_of_an_ordinary_session_is_not_impersonated() -> None:
    assert not is_impersonated({"type": "websocket", "session": session_with(other="x")})


def test_an_empty_hijack_history_is_not_impersonation() -> None:
    assert not is_impersonated(request_with(session_with(hijack_history=[])))


def test_a_scope_without_a_session_is_not_impersonated() -> None:
    assert not is_impersonated({"type": "websocket"})


def test_a_custom_detector_flags_a_request_the_default_would_pass() -> None:
    request = request_with(session_with(), {"X-Support": "1"})
    assert not is_impersonated(request)
    with override_settings(
        AGENT=agent_with(IMPERSONATION_DETECTOR="tests.access.test_impersonation.flagged_by_header")
    ):
        assert is_impersonated(request)


def test_a_custom_detector_flags_a_scope() -> None:
    scope = {"type": "websocket", "session": session_with(), "headers": [(b"x-support", b"1")]}
    with override_settings(
        AGENT=agent_with(IMPERSONATION_DETECTOR="tests.access.test_impersonation.flagged_by_header")
    ):
        assert is_impersonated(scope)


def test_a_custom_detector_replaces_the_default_one() -> None:
    request = request_with(session_with(hijack_history=["1"]))
    with override_settings(
        AGENT=agent_with(IMPERSONATION_DETECTOR="tests.access.test_impersonation.flagged_by_header")
    ):
        assert not is_impersonated(request)


def test_a_session_marked_impersonated_after_sign_in_is_refused_by_the_next_check(session: Any) -> None:
    from agent.access import authorize_session
    from agent.core.errors import Impersonated

    client, ref = session
    authorize_session(ref, impersonated=False)
    store = client.session  # the same session, as django-hijack marks it
    store["hijack_history"] = ["1"]
    store.save()
    with pytest.raises(Impersonated):
        authorize_session(ref, impersonated=False)
