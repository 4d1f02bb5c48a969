"""The websocket routes a site wraps in its ASGI application, as the README shows (the host's import path)."""

from .web.routing import websocket_urlpatterns

__all__ = ["websocket_urlpatterns"]
