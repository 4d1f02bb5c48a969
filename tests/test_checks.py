"""System checks of ``settings.AGENT`` (agent/checks.py): one id per kind of mistake."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from agent.checks import check_agent_settings


def ids_for(agent: Any) -> list[str]:
    with override_settings(AGENT=agent):
        return [error.id for error in check_agent_settings()]


def agent_with(**overrides: Any) -> dict[str, Any]:
    return {**settings.AGENT, **overrides}


def test_the_test_settings_pass_every_check() -> None:
    assert ids_for(settings.AGENT) == []


def test_an_empty_agent_dict_passes_every_check() -> None:
    assert ids_for({}) == []


@pytest.mark.parametrize("agent", [["HISTORY_CHARS"], "HISTORY_CHARS=5", None], ids=["list", "str", "none"])
def test_e001_agent_that_is_not_a_dict(agent: Any) -> None:
    assert ids_for(agent) == ["agent.E001"]


def test_e002_an_unknown_key() -> None:
    assert ids_for(agent_with(HISTORY_CHARZ=10)) == ["agent.E002"]


@pytest.mark.parametrize("value", [0, -5, "100", 1.5, True, None], ids=repr)
def test_e003_a_count_that_is_not_a_positive_int(value: Any) -> None:
    assert ids_for(agent_with(HISTORY_CHARS=value)) == ["agent.E003"]


@pytest.mark.parametrize("value", [-1, -0.01, "5", True, None], ids=repr)
def test_e004_a_cap_that_is_not_a_number_at_least_zero(value: Any) -> None:
    assert ids_for(agent_with(DAILY_COST_PER_USER=value)) == ["agent.E004"]


@pytest.mark.parametrize("value", [0, 2.5])
def test_a_zero_or_fractional_cost_cap_is_valid(value: Any) -> None:
    assert ids_for(agent_with(DAILY_COST_PER_USER=value)) == []


@pytest.mark.parametrize("renew, lease", [(30, 30), (40, 30)])
def test_e005_lock_renewal_not_shorter_than_the_lease(renew: int, lease: int) -> None:
    assert ids_for(agent_with(LOCK_RENEW_S=renew, LOCK_LEASE_S=lease)) == ["agent.E005"]


def test_a_lock_lease_that_is_not_an_int_is_e003_not_a_crash() -> None:
    assert ids_for(agent_with(LOCK_LEASE_S="30")) == ["agent.E003"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"IMPERSONATION_DETECTOR": "nowhere.detector"},
        {"IMPERSONATION_DETECTOR": "agent.access.no_such_function"},
        {"SCOPE_CHECKS": ["tests.test_checks.missing_check"]},
        {"USAGE_SINKS": ["no-dots"]},
        {"SCOPE_CHECKS": [42]},
    ],
    ids=["detector_module", "detector_attr", "scope_check", "usage_sink", "not_a_string"],
)
def test_e006_a_dotted_path_that_cannot_be_imported(overrides: dict[str, Any]) -> None:
    assert ids_for(agent_with(**overrides)) == ["agent.E006"]


def test_importable_dotted_paths_pass() -> None:
    agent = agent_with(
        IMPERSONATION_DETECTOR="agent.access.hijack_detector", SCOPE_CHECKS=["tests.access.test_ladder.passes"]
    )
    assert ids_for(agent) == []


@pytest.mark.parametrize("value", ["notes", [1], None], ids=repr)
def test_e007_session_write_modules_not_a_list_of_names(value: Any) -> None:
    assert ids_for(agent_with(SESSION_WRITE_MODULES=value)) == ["agent.E007"]


@pytest.mark.parametrize("value", [0, -1, "90", True], ids=repr)
def test_e008_retention_days_not_none_nor_a_positive_int(value: Any) -> None:
    assert ids_for(agent_with(RETENTION_DAYS=value)) == ["agent.E008"]


@pytest.mark.parametrize("value", [None, 90])
def test_retention_days_none_or_positive_passes(value: Any) -> None:
    assert ids_for(agent_with(RETENTION_DAYS=value)) == []


def test_the_checks_are_registered_with_django(db: Any) -> None:
    from django.core import checks

    with override_settings(AGENT=agent_with(HISTORY_CHARZ=1)):
        assert "agent.E002" in [e.id for e in checks.run_checks()]
