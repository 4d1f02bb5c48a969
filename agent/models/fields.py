"""Column types of the schema: a text kept encrypted at rest."""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.utils.crypto import salted_hmac

if TYPE_CHECKING:  # generic in Django's stubs only: text in, text out
    from cryptography.fernet import MultiFernet

    _CharField = models.CharField[str, str]
else:
    _CharField = models.CharField


class SealedCharField(_CharField):
    """Text stored encrypted (Fernet) under a key derived from ``SECRET_KEY`` for ``purpose``.

    Older values still open with ``SECRET_KEY_FALLBACKS``; a value no key opens reads as empty,
    which its readers take as "gone". An empty value is stored empty. No lookup on the column
    can test the text: the database holds only tokens.
    """

    def __init__(self, *args: Any, purpose: str, **kwargs: Any) -> None:
        self.purpose = purpose
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["purpose"] = self.purpose
        return name, path, args, kwargs

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return unseal(value, self.purpose) if value else value

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return seal(value, self.purpose) if value else value


def seal(text: str, purpose: str) -> str:
    """``text`` encrypted with the current ``SECRET_KEY``'s key for ``purpose``."""
    return _fernet(purpose, _secrets()).encrypt(text.encode()).decode()


def unseal(token: str, purpose: str) -> str:
    """The text ``seal`` gave ``token`` for, or "" when no current or fallback key opens it."""
    from cryptography.fernet import InvalidToken

    try:
        return _fernet(purpose, _secrets()).decrypt(token.encode()).decode()
    except (InvalidToken, UnicodeDecodeError):
        return ""


def _secrets() -> tuple[str, ...]:
    return (settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ()))


@lru_cache(maxsize=8)
def _fernet(purpose: str, secrets: tuple[str, ...]) -> MultiFernet:
    """One key per secret, the first encrypting; a purpose of its own so no other use of
    ``SECRET_KEY`` (cookies, signed values) shares it."""
    from cryptography.fernet import Fernet, MultiFernet

    salt = f"agent.models.fields.SealedCharField.{purpose}"
    keys = [salted_hmac(salt, "fernet", secret=secret, algorithm="sha256").digest() for secret in secrets]
    return MultiFernet([Fernet(base64.urlsafe_b64encode(key)) for key in keys])
