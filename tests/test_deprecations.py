"""A deprecation warned in our own code fails the test that meets it (``filterwarnings`` in pyproject.toml), so the
suite on each Django that CI runs shows what its next release removes before a site meets it."""

from __future__ import annotations

import warnings

import pytest


@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning])
def test_a_deprecation_warned_in_our_code_is_an_error(category: type[Warning]) -> None:
    with pytest.raises(category):
        warnings.warn("an old way", category, stacklevel=1)
    with pytest.raises(category):
        warnings.warn_explicit("an old way", category, "agent/views.py", 1, module="agent.views")


def test_a_deprecation_warned_in_another_package_stays_a_warning() -> None:
    with pytest.warns(DeprecationWarning):
        warnings.warn_explicit("an old way", DeprecationWarning, "somelib/core.py", 1, module="somelib.core")
