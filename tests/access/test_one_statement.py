"""Checks 1-3 in one statement that is compiled once and reads everything afresh.

The permissions come from one subquery over the user's own and their groups'
permissions, as Django's ModelBackend reads them; a change between two calls
shows at the second, whatever the caller's columns.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent.access import authorize_session, authorize_with
from agent.core import errors
from agent.core.statements import Columns, slot
from tests.support.factories import UserFactory
from tests.support.sessions import login

pytestmark = pytest.mark.django_db

NOTE_COUNT = Columns("tests.note_count", lambda: {"notes_since": _notes_since()})


def _notes_since() -> Any:
    from django.db.models import Count, OuterRef, Subquery

    from tests.notes.models import Note

    mine = Note.objects.filter(owner=OuterRef("pk"), created_at__gte=slot("since")).order_by()
    return Subquery(mine.values("owner").annotate(n=Count("pk")).values("n")[:1])


def _permission(name: str) -> Permission:
    app_label, codename = name.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def test_rights_held_through_a_group_are_read_in_the_scopes_one_statement() -> None:
    # given a user whose rights all come from a group
    user = UserFactory()
    group = Group.objects.create(name="assistants")
    group.permissions.add(_permission("agent.use_agent"), _permission("notes.view_note"))
    user.groups.add(group)
    _client, ref = login(user)
    authorize_session(ref, impersonated=False)  # content types and the compiled statement are warm
    # when the scope is read
    with CaptureQueriesContext(connection) as queries:
        scope = authorize_session(ref, impersonated=False)
    # then one statement gave the group's rights, and only those
    assert len(queries) == 1
    assert scope.has_perm("notes.view_note") and not scope.has_perm("notes.add_note")
    # and leaving the group takes them at the very next call
    user.groups.remove(group)
    with pytest.raises(errors.Forbidden):
        authorize_session(ref, impersonated=False)


def test_own_and_group_rights_add_up_and_each_is_told_apart() -> None:
    user = UserFactory()
    user.user_permissions.add(_permission("agent.use_agent"), _permission("notes.change_note"))
    group = Group.objects.create(name="readers")
    group.permissions.add(_permission("notes.view_note"))
    user.groups.add(group)
    _client, ref = login(user)
    scope = authorize_session(ref, impersonated=False)
    held = {p for p in ("notes.view_note", "notes.add_note", "notes.change_note") if scope.has_perm(p)}
    assert held == {"notes.view_note", "notes.change_note"}


def test_an_active_superuser_holds_every_right_the_statement_reads() -> None:
    user = UserFactory(is_superuser=True)
    _client, ref = login(user)
    scope = authorize_session(ref, impersonated=False)
    assert scope.has_perm("agent.use_agent") and scope.has_perm("notes.add_note")


def test_a_callers_columns_are_bound_afresh_on_every_call(make_user: Any) -> None:
    # given a caller that reads its own column through a slot, twice
    from datetime import timedelta

    from django.utils import timezone

    from tests.notes.models import Note

    user = make_user("notes.view_note")
    _client, ref = login(user)
    Note.objects.create(owner=user, title="a", body="")
    hour_ago = timezone.now() - timedelta(hours=1)
    _scope, first = authorize_with(ref, impersonated=False, annotations=NOTE_COUNT, values={"since": hour_ago})
    Note.objects.create(owner=user, title="b", body="")
    _scope, second = authorize_with(ref, impersonated=False, annotations=NOTE_COUNT, values={"since": hour_ago})
    _scope, later = authorize_with(
        ref, impersonated=False, annotations=NOTE_COUNT, values={"since": timezone.now() + timedelta(hours=1)}
    )
    # then each call read the rows as they were then, with its own values
    assert (first["notes_since"], second["notes_since"], later["notes_since"]) == (1, 2, None)
    # and a right lost between two calls is lost at the second
    user.user_permissions.remove(_permission("notes.view_note"))
    scope, _row = authorize_with(ref, impersonated=False, annotations=NOTE_COUNT, values={"since": hour_ago})
    assert not scope.has_perm("notes.view_note")
