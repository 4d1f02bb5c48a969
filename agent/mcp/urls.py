"""The MCP endpoint's URLs. ``agent.urls`` adds ``urlpatterns`` when ``AGENT["MCP"]`` is set (so the
SDK is imported only then); a site includes ``well_known`` at its root for RFC 9728's discovery (and,
with OAuth on, RFC 8414's): ``path("", include(agent.mcp.urls.well_known))``. The OAuth endpoints
(and django-oauth-toolkit with them) are added only where ``AGENT["MCP"]["OAUTH"]`` is on."""

from django.urls import path, re_path

from . import tokens, views

urlpatterns = [
    path("mcp/", views.endpoint, name="mcp"),
    path("mcp/oauth-protected-resource/", views.metadata, name="mcp_metadata"),
]

well_known = [
    re_path(r"^\.well-known/oauth-protected-resource(?:/(?P<resource>.*))?$", views.metadata),
]

if tokens.oauth_on():
    from oauth2_provider.views import RevokeTokenView, TokenView

    from . import oauth

    urlpatterns += [
        path("mcp/oauth/authorize/", oauth.Consent.as_view(), name="mcp_authorize"),
        path("mcp/oauth/token/", TokenView.as_view(), name="mcp_token"),
        path("mcp/oauth/revoke/", RevokeTokenView.as_view(), name="mcp_revoke_token"),
        path("mcp/oauth/register/", oauth.register, name="mcp_register"),
    ]
    well_known += [
        path(".well-known/oauth-authorization-server", oauth.server_metadata, name="mcp_oauth_server"),
    ]
