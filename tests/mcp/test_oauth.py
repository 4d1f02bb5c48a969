"""Signing an MCP client in with OAuth 2.1: the official ``mcp`` client's own OAuth support over real
HTTP against daphne (discovery from the 401, dynamic registration, the consent page approved with the
user's session, the code exchanged with PKCE, then a listing and a read); and what is refused: a token
without the scope ``agent``, expired or revoked, a user without ``agent.use_mcp``, a registration with
a redirect URI that may not receive codes, a consent page asked without PKCE, an impersonating operator."""

from __future__ import annotations

import asyncio
import html
import json
import re
import sys
from datetime import timedelta
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.contrib.auth.models import Permission
from django.core.checks import run_checks
from django.db import connection
from django.test import Client as DjangoClient
from django.utils import timezone
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import AccessToken, Application, Grant
from oauth2_provider.settings import oauth2_settings

from agent.access import McpRef, prepare_check
from agent.mcp.tokens import digest
from agent.models import McpCall
from tests.notes.models import Note
from tests.support.browser import AsgiServer
from tests.support.factories import UserFactory
from tests.support.sessions import grant

pytestmark = pytest.mark.django_db(transaction=True)

MCP_PATH = "/assistant/mcp/"
REGISTER = "/assistant/mcp/oauth/register/"
AUTHORIZE = "/assistant/mcp/oauth/authorize/"
CALLBACK = "http://127.0.0.1:9/callback"  # never reached: the consent's redirect is caught


@pytest.fixture(scope="module")
def host(django_db_setup: Any, django_db_blocker: Any) -> Iterator[AsgiServer]:
    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    server = AsgiServer(name)
    server.env["AGENT_TEST_SETTINGS"] = json.dumps({"MCP": {"OAUTH": True}, "MCP_REGISTRATIONS_PER_MINUTE": 100})
    server.start()
    yield server
    server.stop()


def member(*permissions: str) -> Any:
    return grant(UserFactory(), "agent.use_agent", "agent.use_mcp", *permissions)


class Memory:
    """The client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The user's browser, signed in to the site: it opens the consent page the client sends it to,
    presses Connect, and catches the redirect to the client's callback with the code."""

    def __init__(self, user: Any) -> None:
        site = DjangoClient()
        site.force_login(user)
        self.cookies = {"sessionid": site.cookies["sessionid"].value}
        self.pages: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(cookies=self.cookies, timeout=30) as browser:
            page = await browser.get(authorization_url)
            assert page.status_code == 200, page.text
            self.pages.append(page.text)
            form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
            fields = {name: html.unescape(value) for name, value in form.items()}
            answer = await browser.post(authorization_url, data={**fields, "allow": "Authorize"})
        assert answer.status_code == 302, answer.text
        location = answer.headers["Location"]
        assert location.startswith(CALLBACK + "?")
        query = parse_qs(urlsplit(location).query)
        self.result = AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def signed_in_client(host: AsgiServer, user: Any, storage: Memory) -> tuple[Client, Browser]:
    browser = Browser(user)
    metadata = OAuthClientMetadata(
        client_name="Claude",
        redirect_uris=[CALLBACK],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    url = host.url + MCP_PATH
    provider = OAuthClientProvider(
        url, metadata, storage, redirect_handler=browser.open, callback_handler=browser.callback
    )
    http = httpx2.AsyncClient(auth=provider, timeout=30)
    return Client(streamable_http_client(url, http_client=http)), browser


def run(coroutine: Any) -> Any:
    try:
        return asyncio.run(coroutine)
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None


def public_client(name: str) -> Any:
    """A client as a registration makes it."""
    return Application.objects.create(
        name=name,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=CALLBACK,
    )


def post(host: AsgiServer, token: str) -> httpx2.Response:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.post(host.url + MCP_PATH, json=request, headers=headers, timeout=30)


def test_a_client_signs_its_user_in_by_itself_and_calls_their_tools(host: AsgiServer) -> None:
    user = member("notes.view_note")
    Note.objects.create(owner=user, title="Groceries")
    storage = Memory()
    client, browser = signed_in_client(host, user, storage)

    async def use() -> tuple[list[str], Any]:
        async with client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            return names, await client.call_tool("notes_search", {"query": "Groceries"})

    names, result = run(use())

    assert "notes_search" in names and "notes_create" not in names  # the user's own tools, as their rights stand
    assert not result.is_error and [note["title"] for note in result.structured_content["notes"]] == ["Groceries"]
    assert len(browser.pages) == 1 and "Connect Claude to your assistant?" in browser.pages[0]
    assert storage.tokens is not None and storage.tokens.scope == "agent"
    application = Application.objects.get(client_id=storage.client.client_id if storage.client else "")
    assert application.client_type == Application.CLIENT_PUBLIC and application.name == "Claude"
    token = AccessToken.objects.get(token_checksum=digest(storage.tokens.access_token))
    assert token.user_id == user.pk and token.application_id == application.pk
    calls = McpCall.objects.filter(user=user).order_by("at")
    assert [(call.method, call.token_name) for call in calls] == [("tools/list", "Claude"), ("tools/call", "Claude")]
    assert {call.oauth_application_id for call in calls} == {application.pk} and not calls.filter(token__isnull=False)

    user.user_permissions.remove(Permission.objects.get(codename="use_mcp"))  # the right withdrawn: the next call
    assert post(host, storage.tokens.access_token).status_code == 403
    grant(user, "agent.use_mcp")
    assert post(host, storage.tokens.access_token).status_code == 200
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    assert post(host, storage.tokens.access_token).status_code == 401
    type(user).objects.filter(pk=user.pk).update(is_active=True)
    token.revoke()  # as staff's "Revoke", the revocation endpoint or the user's disconnect do
    refused = post(host, storage.tokens.access_token)
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["WWW-Authenticate"]


def test_discovery_names_this_site_as_the_authorization_server(host: AsgiServer) -> None:
    challenge = post(host, "").headers["WWW-Authenticate"]
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    resource = httpx2.get(metadata_url, timeout=30).json()
    assert resource["authorization_servers"] == [host.url]
    server = httpx2.get(host.url + "/.well-known/oauth-authorization-server", timeout=30).json()
    assert server["issuer"] == host.url
    assert server["code_challenge_methods_supported"] == ["S256"] and server["scopes_supported"] == ["agent"]
    assert server["registration_endpoint"] == host.url + REGISTER
    assert server["token_endpoint_auth_methods_supported"] == ["none"]


@pytest.mark.parametrize(
    ("scope", "expires_in"),
    [("read", timedelta(hours=1)), ("agent", -timedelta(seconds=1)), ("agentx read", timedelta(hours=1))],
    ids=["without the scope agent", "expired", "a scope that only starts like agent"],
)
def test_a_token_the_endpoint_may_not_take_is_401(host: AsgiServer, scope: str, expires_in: timedelta) -> None:
    user = member("notes.view_note")
    client = public_client("Other")
    secret = f"oauth-{scope.replace(' ', '-')}-{user.pk}"
    AccessToken.objects.create(
        user=user, application=client, token=secret, scope=scope, expires=timezone.now() + expires_in
    )
    refused = post(host, secret)
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["WWW-Authenticate"]
    assert not McpCall.objects.filter(user=user).exists()


def test_the_rights_check_reads_the_toolkits_table_only_for_an_oauth_token() -> None:
    personal = prepare_check(McpRef(digest="x"), impersonated=False).sql
    oauth = prepare_check(McpRef(digest="x", oauth=True), impersonated=False).sql
    assert "oauth2_provider" not in personal
    assert "oauth2_provider_accesstoken" in oauth and "oauth2_provider_application" in oauth


def test_oauth_without_the_toolkit_or_its_scope_is_named_at_start(monkeypatch: Any) -> None:
    ids = ("agent.E023", "agent.E024", "agent.E025", "agent.W009")
    assert not [m for m in run_checks(tags=["agent"]) if m.id in ids]
    monkeypatch.setattr(oauth2_settings, "SCOPES", {"read": "Read your data"})
    assert [m.id for m in run_checks(tags=["agent"]) if m.id in ids] == ["agent.E025"]
    monkeypatch.setitem(sys.modules, "oauth2_provider.settings", None)  # as if the toolkit were not installed
    found = [m for m in run_checks(tags=["agent"]) if m.id in ids]
    assert [(m.id, m.hint) for m in found] == [("agent.E023", 'pip install "django-agent[oauth]"')]


# -- registration --------------------------------------------------------------------------------


def register(body: Any, address: str = "10.0.0.1") -> Any:
    return DjangoClient(REMOTE_ADDR=address).post(REGISTER, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(
    "uri",
    [
        "http://example.com/callback",
        "javascript:alert(1)",
        "https://example.com/cb#frag",
        "https://user@example.com/",
        "https://example.com/a b",
        "cursor://callback",
        "",
    ],
)
def test_a_registration_with_a_redirect_uri_that_may_not_get_codes_is_refused(uri: str) -> None:
    response = register({"client_name": "Bad", "redirect_uris": [uri]})
    assert response.status_code == 400 and response.json()["error"] == "invalid_redirect_uri"
    assert not Application.objects.filter(name="Bad").exists()


def test_a_registration_makes_a_public_client_of_the_authorization_code_only() -> None:
    uris = ["https://chatgpt.com/connector_platform_oauth_redirect", "http://127.0.0.1:33418/callback"]
    response = register({"client_name": "  ChatGPT  ", "redirect_uris": uris, "token_endpoint_auth_method": "none"})
    assert response.status_code == 201
    body = response.json()
    assert body["client_name"] == "ChatGPT" and body["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in body and body["scope"] == "agent"
    client = Application.objects.get(client_id=body["client_id"])
    assert client.client_type == Application.CLIENT_PUBLIC
    assert client.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE
    assert client.redirect_uris.split() == uris

    too_long = register({"client_name": "x" * 101, "redirect_uris": uris})
    assert too_long.status_code == 400 and too_long.json()["error"] == "invalid_client_metadata"
    other_grant = register({"redirect_uris": uris, "grant_types": ["client_credentials"]})
    assert other_grant.status_code == 400 and other_grant.json()["error"] == "invalid_client_metadata"
    not_json = DjangoClient().post(REGISTER, "nope", content_type="application/json")
    assert not_json.status_code == 400 and not_json.json()["error"] == "invalid_client_metadata"


def test_registrations_are_capped_per_address(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MCP_REGISTRATIONS_PER_MINUTE": 2}
    body = {"client_name": "Many", "redirect_uris": ["https://example.com/cb"]}
    assert [register(body, "10.0.0.7").status_code for _ in range(3)] == [201, 201, 429]
    assert register(body, "10.0.0.8").status_code == 201  # another address has its own
    refused = register(body, "10.0.0.7")
    assert refused.json()["error"] == "too_many_requests" and refused["Retry-After"] == "60"


# -- the consent page ----------------------------------------------------------------------------


def consent(user: Any, **params: str) -> Any:
    client = public_client("Claude")
    browser = DjangoClient()
    browser.force_login(user)
    query = {
        "client_id": client.client_id,
        "response_type": "code",
        "redirect_uri": CALLBACK,
        "state": "s",
        "scope": "agent",
        **params,
    }
    return browser, browser.get(AUTHORIZE, query)


CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_the_consent_page_asks_for_pkce_with_s256() -> None:
    user = member()
    _browser, without = consent(user)
    assert without.status_code == 400 and "PKCE" in without.content.decode()
    _browser, plain = consent(user, code_challenge=CHALLENGE, code_challenge_method="plain")
    assert plain.status_code == 400
    _browser, page = consent(user, code_challenge=CHALLENGE, code_challenge_method="S256")
    assert page.status_code == 200 and "Connect Claude to your assistant?" in page.content.decode()
    assert "form-action 'self' http://127.0.0.1:9" in page["Content-Security-Policy"]
    assert not Grant.objects.exists()


def test_the_consent_page_refuses_a_user_without_mcp_and_an_impersonating_operator() -> None:
    _browser, page = consent(
        grant(UserFactory(), "agent.use_agent"), code_challenge=CHALLENGE, code_challenge_method="S256"
    )
    assert page.status_code == 403
    browser, _page = consent(member(), code_challenge=CHALLENGE, code_challenge_method="S256")
    session = browser.session
    session["hijack_history"] = ["1"]
    session.save()
    query = {
        "client_id": Application.objects.latest("id").client_id,
        "response_type": "code",
        "redirect_uri": CALLBACK,
        "state": "s",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
    }
    assert browser.get(AUTHORIZE, query).status_code == 403
    assert browser.post(AUTHORIZE, {**query, "scope": "agent", "allow": "Authorize"}).status_code == 403
    assert not Grant.objects.exists()


def test_the_consent_page_is_translated(settings: Any) -> None:
    user = member()
    browser = DjangoClient(HTTP_ACCEPT_LANGUAGE="ru")
    browser.force_login(user)
    client = public_client("Claude")
    query = {
        "client_id": client.client_id,
        "response_type": "code",
        "redirect_uri": CALLBACK,
        "state": "s",
        "scope": "agent",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
    }
    page = browser.get(AUTHORIZE, query).content.decode()
    assert "Подключить Claude к вашему ассистенту?" in page
