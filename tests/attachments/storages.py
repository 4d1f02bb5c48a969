"""Storages for the tests: one with no local paths at all, and ones whose backend fails as a remote one can."""

from __future__ import annotations

from typing import Any

from django.core.files.storage import InMemoryStorage


class StorageDown(Exception):
    """What a remote backend raises that is no ``OSError`` (botocore's ``ClientError`` is one)."""


class UnopenableStorage(InMemoryStorage):
    """Saves and deletes, but every open for reading fails."""

    def _open(self, name: str, mode: str = "rb") -> Any:
        if "r" in mode:
            raise StorageDown("the bucket is unreachable")
        return super()._open(name, mode)


class UnreadableStorage(InMemoryStorage):
    """Opens, but reading fails, as a download that breaks off would."""

    def _open(self, name: str, mode: str = "rb") -> Any:
        handle = super()._open(name, mode)
        return _BrokenOff(handle.size) if "r" in mode else handle


class _BrokenOff:
    def __init__(self, size: int) -> None:
        self.size = size

    def read(self, *args: Any) -> bytes:
        raise StorageDown("connection reset")

    def seek(self, *args: Any) -> int:
        return 0

    def close(self) -> None:
        pass

    def __enter__(self) -> "_BrokenOff":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


class UndeletableStorage(InMemoryStorage):
    """Saves and opens, but every delete fails."""

    def delete(self, name: str) -> None:
        raise StorageDown("the bucket refuses deletes")
