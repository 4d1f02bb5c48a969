"""A compiled statement builds the rows ``QuerySet`` would, on every Django that CI tests.

What ``agent.core.statements`` reads of Django's SQL compiler is read when a statement is
compiled; these tests fail with ``StatementError``'s message if a Django release
describes a query's columns otherwise.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import CharField, Count, F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent.core.statements import Statement, StatementError, _parts, slot
from tests.support.factories import UserFactory, UserSettingsFactory

pytestmark = pytest.mark.django_db


def _statement() -> Statement:
    """The shape of the check ladder's statement: the user, their settings joined, a slot, annotations."""
    users = get_user_model()._default_manager
    queryset = (
        users.select_related("agent_settings")
        .filter(pk=slot("user", get_user_model()._meta.pk), last_login__lte=slot("now"))
        .annotate(agent_groups=Count("groups"), agent_name_again=F("username"), agent_said=slot("said", CharField()))
    )
    return Statement(queryset, ["agent_groups", "agent_name_again", "agent_said"])


def _row(statement: Statement, user: Any) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, statement.bind({"user": user.pk, "now": timezone.now(), "said": "hi"}))
        return cursor.fetchone()


def test_a_user_with_settings_is_built_with_the_settings_joined_and_the_annotations() -> None:
    # given a user with their own settings, and the statement compiled
    user = UserFactory(last_login=timezone.now())
    own = UserSettingsFactory(user=user, enabled=False)
    statement = _statement()
    row = _row(statement, user)
    # when the row is built
    with CaptureQueriesContext(connection) as queries:
        built = statement.build(row)
        settings = built.agent_settings
        assert settings.user is built  # both sides of the relation are tied
    # then it is the user QuerySet gives, with the settings read in the same statement
    assert len(queries) == 0
    expected = get_user_model()._default_manager.select_related("agent_settings").get(pk=user.pk)
    assert type(built) is type(expected) and built.pk == user.pk and not built._state.adding
    assert [getattr(built, f.attname) for f in built._meta.concrete_fields] == [
        getattr(expected, f.attname) for f in expected._meta.concrete_fields
    ]
    assert (settings.pk, settings.enabled) == (own.pk, False) and built._state.db == settings._state.db == "default"
    assert (built.agent_groups, built.agent_name_again, built.agent_said) == (0, user.username, "hi")
    assert statement.found(row, "agent_settings")


def test_a_user_without_settings_is_built_without_them_and_found_says_so_without_a_query() -> None:
    # given a user who never saved settings of their own
    user = UserFactory(last_login=timezone.now())
    statement = _statement()
    row = _row(statement, user)
    # when the row is built
    with CaptureQueriesContext(connection) as queries:
        built = statement.build(row)
        found = statement.found(row, "agent_settings")
    # then the user is there and no settings are, with no query to learn it
    assert len(queries) == 0
    assert built.pk == user.pk and found is False


def test_a_row_that_is_not_there_builds_no_user() -> None:
    # given a user whose last login is after the slot's time
    user = UserFactory(last_login=timezone.now() + timedelta(days=1))
    statement = _statement()
    # then the run finds no row
    assert statement.run({"user": user.pk, "now": timezone.now(), "said": "hi"}) is None


@pytest.mark.parametrize(
    "compiler, says",
    [
        (SimpleNamespace(select=[]), "klass_info"),  # no description of the columns at all
        (SimpleNamespace(klass_info={"model": None}, select=[]), "select_fields"),  # a description renamed
    ],
)
def test_a_compiler_that_describes_its_columns_otherwise_is_refused_loudly(compiler: Any, says: str) -> None:
    # when a Django's compiler no longer describes its columns as the statement reads them
    with pytest.raises(StatementError) as refused:
        _parts(compiler)
    # then the statement says so, with the Django version, instead of building wrong rows
    assert "SQL compiler" in str(refused.value) and says in str(refused.value)
