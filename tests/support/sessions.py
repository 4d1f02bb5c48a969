"""Signed-in clients: permissions given, a real login through the session engine, a CSRF-checking client."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from agent.access import SessionRef


def grant(user: Any, *codenames: str) -> Any:
    """Give ``user`` permissions by ``app_label.codename`` and return a fresh copy."""
    for name in codenames:
        app_label, codename = name.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return type(user).objects.get(pk=user.pk)


def login(user: Any) -> tuple[Client, SessionRef]:
    """A real login through Django's session engine: the client and its session ref."""
    client = Client()
    client.force_login(user)
    return client, SessionRef(session_key=client.session.session_key, user_id=user.pk)


def csrf_client(user: Any) -> tuple[Client, str]:
    """A logged-in client that enforces CSRF, and the token its page would carry."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get(reverse("agent:chat"))
    return client, client.cookies["csrftoken"].value
