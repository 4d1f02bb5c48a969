"""System checks of the optional libraries a setting asks for: python-telegram-bot for
``AGENT["TELEGRAM"]``, the MCP SDK for ``AGENT["MCP"]``, django-oauth-toolkit and its wiring for
MCP's OAuth sign-in.

Apart because the app does not require these libraries: each check is quiet until its setting is on.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, register
from django.core.checks import Warning as CheckWarning
from django.urls import NoReverseMatch, reverse

from ..access import OAUTH_SCOPE
from ..core.conf import agent_settings
from . import TAG


@register(TAG)
def check_telegram_library(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """A site that configures its bot needs python-telegram-bot, which the app does not require."""
    if not agent_settings.TELEGRAM:
        return []
    try:
        import telegram  # noqa: F401
    except ImportError:
        return [
            Error(
                "AGENT['TELEGRAM'] is set, but python-telegram-bot is not installed.",
                hint='pip install "django-agent[telegram]"',
                id="agent.E020",
            )
        ]
    return []


@register(TAG)
def check_mcp_library(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """A site that serves MCP needs the official SDK, which the app does not require."""
    if agent_settings.MCP is None:
        return []
    try:
        import mcp  # noqa: F401
    except ImportError:
        return [
            Error(
                "AGENT['MCP'] is set, but the mcp SDK is not installed.",
                hint='pip install "django-agent[mcp]"',
                id="agent.E022",
            )
        ]
    return []


@register(TAG)
def check_mcp_oauth(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Signing MCP clients in with OAuth needs django-oauth-toolkit installed and migrated, the scope
    ``agent`` among its scopes, and the metadata at the site's root, where clients look for it."""
    if not isinstance(agent_settings.MCP, dict) or agent_settings.MCP.get("OAUTH") is not True:
        return []
    try:
        from oauth2_provider.settings import oauth2_settings
    except ImportError:
        message = "AGENT['MCP']['OAUTH'] is on, but django-oauth-toolkit is not installed."
        return [Error(message, hint='pip install "django-agent[oauth]"', id="agent.E023")]
    if not apps.is_installed("oauth2_provider"):
        message = "AGENT['MCP']['OAUTH'] is on, but 'oauth2_provider' is not in INSTALLED_APPS."
        return [Error(message, hint="Add it to INSTALLED_APPS and migrate (docs/mcp.md).", id="agent.E024")]
    found: list[CheckMessage] = []
    if OAUTH_SCOPE not in oauth2_settings.SCOPES:
        found.append(
            Error(
                f"AGENT['MCP']['OAUTH'] is on, but OAUTH2_PROVIDER['SCOPES'] has no {OAUTH_SCOPE!r} scope.",
                hint=f'OAUTH2_PROVIDER = {{"SCOPES": {{"{OAUTH_SCOPE}": "Use your assistant\'s tools", ...}}}}',
                id="agent.E025",
            )
        )
    try:
        at_root = reverse("mcp_oauth_server") == "/.well-known/oauth-authorization-server"
    except (NoReverseMatch, ImportError):  # not included; or the URLs cannot load (agent.E022 says why)
        at_root = False
    if not at_root:
        message = "MCP clients cannot find the authorization server at /.well-known/oauth-authorization-server."
        hint = 'Include agent.mcp.urls.well_known at the site\'s root: path("", include(well_known)).'
        found.append(CheckWarning(message, hint=hint, id="agent.W009"))
    return found
