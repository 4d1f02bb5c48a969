"""The MCP endpoint's URLs. ``agent.urls`` adds ``urlpatterns`` when ``AGENT["MCP"]`` is set (so the
SDK is imported only then); a site includes ``well_known`` at its root for RFC 9728's discovery:
``path("", include(agent.mcp.urls.well_known))``."""

from django.urls import path, re_path

from . import views

urlpatterns = [
    path("mcp/", views.endpoint, name="mcp"),
    path("mcp/oauth-protected-resource/", views.metadata, name="mcp_metadata"),
]

well_known = [
    re_path(r"^\.well-known/oauth-protected-resource(?:/(?P<resource>.*))?$", views.metadata),
]
