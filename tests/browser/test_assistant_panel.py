"""The "My assistant" panel end to end: the real ASGI app, headless Chromium, the strict policy."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent.access import McpRef, authorize_session
from agent.core.errors import SessionGone
from agent.mcp.tokens import digest
from agent.models import AgentSettings, Endpoint, UserSettings
from tests.support.factories import EndpointFactory
from tests.support.sessions import grant

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def open_panel(tab: Page, user: Any) -> None:
    tab.goto("/accounts/login/?next=/assistant/assistant/")
    tab.fill("#id_username", user.username)
    tab.fill("#id_password", "pw-for-tests")
    tab.click(".login-form button[type=submit]")
    expect(tab.locator("#settings-form")).to_be_visible()


def test_a_user_picks_an_allowed_model_and_writes_instructions(tab: Page, user: Any, endpoint: Endpoint) -> None:
    second = EndpointFactory(name="second", base_url=endpoint.base_url, model="second-model")
    AgentSettings.current().selectable_endpoints.set([second])
    open_panel(tab, user)
    expect(tab.locator("#models dd").first).to_contain_text("The site's default model.")
    expect(tab.locator("#picker")).to_be_visible()
    tab.select_option("#pick-endpoint", str(second.pk))
    tab.fill("#instructions", "Answer in one line.")
    tab.click("#save")
    expect(tab.locator("#saved")).to_have_text("Saved.")
    expect(tab.locator("#models dd").first).to_contain_text("second (second-model) — Your own model.")
    row = UserSettings.objects.get(user=user)
    assert (row.endpoint, row.endpoint_set_by, row.instructions) == (second, "user", "Answer in one line.")


def test_too_long_instructions_are_refused_by_field(tab: Page, user: Any, endpoint: Endpoint) -> None:
    open_panel(tab, user)
    expect(tab.locator("#picker")).to_be_hidden()  # an empty allow-list: nothing to pick
    tab.fill("#instructions", "x" * 4001)
    tab.click("#save")
    expect(tab.locator("#error-instructions")).to_contain_text("4000")
    assert not UserSettings.objects.filter(user=user, instructions__startswith="x").exists()


def test_the_panel_lists_each_quota_used_against_its_cap(tab: Page, user: Any, endpoint: Endpoint) -> None:
    open_panel(tab, user)
    quotas = tab.locator("#quotas li")
    expect(quotas).to_have_count(4)
    expect(quotas.nth(0)).to_have_text("Stored files: 0\xa0bytes of 500.0\xa0MB")
    expect(quotas.nth(1)).to_have_text("New chats in the last minute: 0 of 20")
    expect(quotas.nth(2)).to_have_text("Files added in the last minute: 0 of 30")
    expect(quotas.nth(3)).to_have_text("Recordings transcribed in the last minute: 0 of 10")


def test_a_user_makes_a_token_for_an_mcp_client_sees_it_once_and_revokes_it(
    tab: Page, user: Any, endpoint: Endpoint
) -> None:
    grant(user, "agent.use_mcp")
    open_panel(tab, user)
    expect(tab.locator("#mcp")).to_be_visible()
    expect(tab.locator("#mcp-url")).to_have_text(tab.url.split("/assistant/")[0] + "/assistant/mcp/")
    tab.fill("#mcp-name", "Claude Desktop")
    tab.click("#mcp-create")
    expect(tab.locator("#mcp-secret-note")).to_be_visible()
    secret = tab.locator("#mcp-secret").inner_text()
    assert authorize_session(McpRef(digest(secret)), impersonated=False).user_id == user.pk
    line = tab.locator("#mcp-tokens li")
    expect(line).to_contain_text("Claude Desktop: not used yet")

    line.get_by_role("button", name="Revoke").click()
    expect(tab.locator("#mcp-tokens li")).to_have_count(0)
    expect(tab.locator("#mcp-secret-note")).to_be_hidden()
    with pytest.raises(SessionGone):
        authorize_session(McpRef(digest(secret)), impersonated=False)


def test_the_mcp_section_is_hidden_without_use_mcp(tab: Page, user: Any, endpoint: Endpoint) -> None:
    open_panel(tab, user)
    expect(tab.locator("#mcp")).to_be_hidden()


def test_the_panel_says_how_many_tools_the_assistant_may_use(tab: Page, user: Any, endpoint: Endpoint) -> None:
    open_panel(tab, user)  # the user reads, adds and changes notes: the test site's six tools
    expect(tab.locator("#tools")).to_have_text("The assistant can use 6 tools of this site for you.")
