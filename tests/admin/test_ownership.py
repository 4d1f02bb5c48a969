"""No admin form moves a row to another user: the owner is read-only once the row exists, for every
staff member, superusers too, whatever a crafted POST says."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent.admin.permissions import ManageAgentMixin, owner_fields
from agent.models import (
    AIRequest,
    Confirmation,
    Conversation,
    McpCall,
    McpToken,
    OffPurposeFlag,
    TelegramLink,
    Turn,
    UserSettings,
)
from tests.support.factories import AIRequestFactory, ConversationFactory, TurnFactory, UserFactory, UserSettingsFactory


def _chat(user: Any) -> Any:
    return ConversationFactory(user=user)


def _turn(user: Any) -> Turn:
    chat = _chat(user)
    return TurnFactory(conversation=chat, deadline_at=timezone.now())


def _confirmation(user: Any) -> Confirmation:
    return Confirmation.objects.create(
        user=user,
        conversation=_chat(user),
        tool_name="notes_create",
        call_id="c1",
        arguments={"title": "t"},
        preview={"title": "t"},
        fingerprint="f",
        expires_at="2099-01-01T00:00:00Z",
    )


def _token(user: Any) -> McpToken:
    return McpToken.objects.create(user=user, name="laptop", digest=f"d{user.pk}", expires_at="2099-01-01T00:00:00Z")


def _mcp_call(user: Any) -> McpCall:
    return McpCall.objects.create(token=_token(user), token_name="laptop", user=user, method="tools/call")


ROWS: dict[type, Callable[[Any], Any]] = {
    UserSettings: lambda user: UserSettingsFactory(user=user, instructions="alice's own words"),
    AIRequest: lambda user: AIRequestFactory(user=user, status="success"),
    OffPurposeFlag: lambda user: OffPurposeFlag.objects.create(user=user, turn_ref=_turn(user).pk, reason="r"),
    TelegramLink: lambda user: TelegramLink.objects.create(user=user, chat_id=4242),
    Turn: _turn,
    Confirmation: _confirmation,
    Conversation: _chat,
    McpToken: _token,
    McpCall: _mcp_call,
}

OWNED = sorted(
    (model for model in admin.site._registry if model._meta.app_label == "agent" and owner_fields(model)),
    key=lambda model: model._meta.model_name,
)


def test_every_agent_admin_with_an_owner_is_covered_here():
    assert OWNED and all(model in ROWS for model in OWNED)
    assert all(isinstance(admin.site._registry[model], ManageAgentMixin) for model in OWNED)


def _form_data(response: Any) -> dict[str, Any]:
    """What the change form would POST as it stands: the main form, and each inline's management form and rows."""
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    data: dict[str, Any] = {}
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is None or value is False:
                continue
            data[form.add_prefix(name)] = "on" if value is True else value
    return data


@pytest.mark.parametrize("model", OWNED, ids=lambda model: model._meta.model_name)
def test_a_change_form_posted_with_another_users_id_keeps_the_owner(db, model):
    # given alice's row, and a superuser who may change everything
    alice, bob = UserFactory(), UserFactory()
    row = ROWS[model](alice)
    staff = Client()
    staff.force_login(UserFactory(is_staff=True, is_superuser=True))
    url = reverse(f"admin:agent_{model._meta.model_name}_change", args=[row.pk])
    page = staff.get(url)
    assert page.status_code == 200
    # when the change form is POSTed with bob's id as every owner
    data = {**_form_data(page), **{name: str(bob.pk) for name in owner_fields(model)}, "_save": "Save"}
    response = staff.post(url, data)
    # then the form saved (or the page is read-only), and the row is still alice's
    if admin.site._registry[model].has_change_permission(page.wsgi_request, row):
        assert response.status_code == 302, getattr(response.context.get("adminform"), "form", None).errors
    else:
        assert response.status_code == 403
    row.refresh_from_db()
    assert all(getattr(row, f"{name}_id") == alice.pk for name in owner_fields(model))


def test_a_new_user_settings_row_still_names_its_user(db):
    # given a superuser on the add form
    staff = Client()
    staff.force_login(UserFactory(is_staff=True, is_superuser=True))
    carol = UserFactory()
    # when a row is added for carol
    response = staff.post(
        reverse("admin:agent_usersettings_add"), {"user": str(carol.pk), "enabled": "on", "_save": "Save"}
    )
    # then it is carol's: the owner is fixed only once the row exists
    assert response.status_code == 302
    assert UserSettings.objects.get(user=carol)
