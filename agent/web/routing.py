"""The websocket's route; a site includes it in its ASGI application through ``agent.routing``."""

from django.urls import path

from .consumers import WEBSOCKET_PATH, AgentConsumer

websocket_urlpatterns = [path(WEBSOCKET_PATH, AgentConsumer.as_asgi())]
