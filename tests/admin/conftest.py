"""Staff clients with a chosen set of the assistant's permissions."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from django.test import Client


@pytest.fixture
def staff_with(make_user: Any) -> Callable[..., Client]:
    """``staff_with("agent.view_chat_content")``: a signed-in staff client with ``agent.manage_agent`` and those."""

    def sign_in(*permissions: str) -> Client:
        client = Client()
        client.force_login(make_user("agent.manage_agent", *permissions, is_staff=True))
        return client

    return sign_in


@pytest.fixture
def staff(staff_with: Callable[..., Client]) -> Client:
    """Staff with ``agent.manage_agent`` alone."""
    return staff_with()
