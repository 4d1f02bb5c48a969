"""Files the tests make with the formats' own writers, and a storage of their own in a temporary folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def storage_root(settings: Any, tmp_path: Path) -> Path:
    """Each test stores files in its own folder, through Django's storage API."""
    root = tmp_path / "media"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(root)}},
    }
    return root
