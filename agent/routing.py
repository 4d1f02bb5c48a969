"""Websocket routes; a site wraps them as ``agent_project.asgi`` does."""
from django.urls import path

from .consumers import AgentConsumer

websocket_urlpatterns = [path("ws/agent/", AgentConsumer.as_asgi())]
