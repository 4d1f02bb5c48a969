"""Websocket routes; a site wraps them in its ASGI application as the README shows."""

from django.urls import path

from .consumers import AgentConsumer

WEBSOCKET_PATH = "ws/agent/"
"""Where the chat page's socket connects; the page reads it from here."""

websocket_urlpatterns = [path(WEBSOCKET_PATH, AgentConsumer.as_asgi())]
