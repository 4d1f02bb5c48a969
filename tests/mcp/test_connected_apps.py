"""The apps a user connected with OAuth, on "My assistant": listed by their registered name with when
they were connected and last called, never a token; disconnected with every token of that user's for
that app revoked, and only that; another user's app is not found; without OAuth the part is absent."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from agent.access import McpRef, authorize_session
from agent.core import errors
from agent.mcp.tokens import digest
from agent.models import McpCall
from tests.mcp.test_oauth import CALLBACK, member, public_client
from tests.support.sessions import csrf_client

pytestmark = pytest.mark.django_db


def connect(user: Any, client: Any, name: str) -> tuple[str, str]:
    """What the consent and the code exchange leave: an access token of scope ``agent`` with its
    refresh token. Their secrets."""
    access_secret, refresh_secret = f"at-{name}-{user.pk}-{client.pk}", f"rt-{name}-{user.pk}-{client.pk}"
    access = AccessToken.objects.create(
        user=user, application=client, token=access_secret, scope="agent", expires=timezone.now() + timedelta(hours=1)
    )
    RefreshToken.objects.create(user=user, application=client, token=refresh_secret, access_token=access)
    return access_secret, refresh_secret


def refresh_only(user: Any, client: Any, secret: str, scope: str = "agent", **fields: Any) -> Any:
    """A refresh token whose access token has expired (the toolkit keeps that row while it is linked)."""
    expired = AccessToken.objects.create(
        user=user, application=client, token=f"at-of-{secret}", scope=scope, expires=timezone.now() - timedelta(hours=1)
    )
    return RefreshToken.objects.create(user=user, application=client, token=secret, access_token=expired, **fields)


def check(secret: str) -> Any:
    return authorize_session(McpRef(digest(secret), oauth=True), impersonated=False)


def disconnect(client: Client, csrf: str, app: Any) -> Any:
    url = reverse("agent:mcp_disconnect")
    return client.post(url, {"app": app}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)


def test_my_assistant_lists_the_users_connected_apps_never_a_token() -> None:
    user, other = member(), member()
    claude, chatgpt, cursor = public_client("Claude"), public_client("ChatGPT"), public_client("Cursor")
    secrets = [*connect(user, claude, "a"), *connect(other, cursor, "b")]
    refresh_only(user, chatgpt, "rt-only")
    AccessToken.objects.create(  # expired, with no refresh token: no longer connected
        user=user, application=cursor, token="at-old", scope="agent", expires=timezone.now() - timedelta(minutes=1)
    )
    used = McpCall.objects.create(user=user, oauth_application_id=claude.pk, token_name="Claude", method="tools/list")
    client, _csrf = csrf_client(user)

    apps = client.get(reverse("agent:assistant_api")).json()["mcp"]["apps"]
    page = client.get(reverse("agent:assistant")).content.decode()

    assert [(app["id"], app["name"]) for app in apps] == [(chatgpt.pk, "ChatGPT"), (claude.pk, "Claude")]
    listed = {app["name"]: app for app in apps}
    assert listed["Claude"]["last_used_at"] == used.at.isoformat() and listed["ChatGPT"]["last_used_at"] is None
    assert listed["Claude"]["connected_at"] == AccessToken.objects.get(application=claude).created.isoformat()
    assert not any(secret in str(apps) for secret in [*secrets, "rt-only", "at-old", claude.client_id])
    assert 'id="mcp-apps"' in page and "Apps you connected by signing in" in page


def test_a_client_that_refreshed_still_shows_when_it_was_connected() -> None:
    user, claude = member(), public_client("Claude")
    first = refresh_only(user, claude, "rt-1", token_family=uuid.uuid4())
    first.revoke()  # rotated, as the toolkit does (its access token deleted): the next one is of the same family
    refresh_only(user, claude, "rt-2", token_family=first.token_family)
    client, _csrf = csrf_client(user)
    (app,) = client.get(reverse("agent:assistant_api")).json()["mcp"]["apps"]
    assert app["connected_at"] == first.created.isoformat()


def test_disconnect_revokes_every_token_of_that_app_for_that_user_and_only_those() -> None:
    # given: the user connected Claude twice (two devices) and ChatGPT; another user connected Claude too
    user, other = member(), member()
    claude, chatgpt = public_client("Claude"), public_client("ChatGPT")
    laptop, phone, theirs = connect(user, claude, "laptop"), connect(user, claude, "phone"), connect(other, claude, "x")
    kept = connect(user, chatgpt, "kept")
    Grant.objects.create(
        user=user,
        application=claude,
        code="pending",
        expires=timezone.now() + timedelta(minutes=1),
        redirect_uri=CALLBACK,
    )
    for secret in (laptop[0], phone[0], kept[0], theirs[0]):
        check(secret)
    client, csrf = csrf_client(user)

    # when
    answer = disconnect(client, csrf, claude.pk)

    # then: the user's Claude tokens are gone, their refresh tokens revoked, the pending grant dropped
    assert answer.status_code == 200
    assert [app["name"] for app in answer.json()["mcp"]["apps"]] == ["ChatGPT"]
    for secret in (laptop[0], phone[0]):
        with pytest.raises(errors.SessionGone):
            check(secret)
    assert not AccessToken.objects.filter(user=user, application=claude).exists()
    assert not RefreshToken.objects.filter(user=user, application=claude, revoked__isnull=True).exists()
    assert not Grant.objects.filter(user=user, application=claude).exists()
    # and the user's other app and the other user's Claude are untouched
    assert check(kept[0]).user_id == user.pk and check(theirs[0]).user_id == other.pk
    assert RefreshToken.objects.filter(revoked__isnull=True, token__in=[kept[1], theirs[1]]).count() == 2
    assert Application.objects.filter(pk=claude.pk).exists()  # the client stays registered for others


def test_another_users_app_or_none_is_not_found_and_changes_nothing() -> None:
    user, other = member(), member()
    theirs = public_client("Claude")
    secret, refresh = connect(other, theirs, "x")
    client, csrf = csrf_client(user)

    for app in (theirs.pk, "nope", None, 10**9):
        refused = disconnect(client, csrf, app)
        assert refused.status_code == 404 and refused.json()["error"] == "not_found", app
    assert check(secret).user_id == other.pk
    assert RefreshToken.objects.get(token=refresh).revoked is None


def test_disconnect_needs_a_post_with_the_csrf_token() -> None:
    user, claude = member(), public_client("Claude")
    secret, _refresh = connect(user, claude, "x")
    client, _csrf = csrf_client(user)
    url = reverse("agent:mcp_disconnect")
    assert client.post(url, {"app": claude.pk}, content_type="application/json").status_code == 403
    assert client.get(url).status_code == 405
    assert check(secret).user_id == user.pk


def test_without_oauth_the_page_has_no_connected_apps(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MCP": {}}
    user, claude = member(), public_client("Claude")
    connect(user, claude, "x")
    client, _csrf = csrf_client(user)

    mcp = client.get(reverse("agent:assistant_api")).json()["mcp"]
    page = client.get(reverse("agent:assistant")).content.decode()

    assert mcp["offered"] and "apps" not in mcp
    assert 'id="mcp-apps"' not in page and "Apps you connected by signing in" not in page
    assert '"mcp_disconnect_url": ""' in page


def test_the_sites_other_oauth_clients_are_not_listed_nor_disconnected_here() -> None:
    user, claude, mobile = member(), public_client("Claude"), public_client("The site's own app")
    connect(user, claude, "a")
    AccessToken.objects.create(
        user=user, application=mobile, token="at-site", scope="read write", expires=timezone.now() + timedelta(hours=1)
    )
    refresh_only(user, mobile, "rt-site", scope="read")
    client, csrf = csrf_client(user)

    assert [app["name"] for app in client.get(reverse("agent:assistant_api")).json()["mcp"]["apps"]] == ["Claude"]
    assert disconnect(client, csrf, mobile.pk).status_code == 404
    assert AccessToken.objects.filter(application=mobile).count() == 2
    assert RefreshToken.objects.get(token="rt-site").revoked is None
