"""The admin's list pages as a test reads them."""

from __future__ import annotations

from typing import Any

from django.test import Client


def listing(client: Client, url: str, **params: Any) -> tuple[int, int | None]:
    """A list page's answer to a query string: its status and, when it shows rows, how many."""
    response = client.get(url, params)
    changelist = (getattr(response, "context", None) or {}).get("cl") if response.status_code == 200 else None
    return response.status_code, (changelist.result_count if changelist is not None else None)
