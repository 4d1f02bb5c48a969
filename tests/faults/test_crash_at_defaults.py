"""Crash → tabs told at the production lease (``LOCK_LEASE_S`` 30, renewed every 10 s; sweep every 10 s).

The figure the promise "chat free and tabs told within 45 s of a crash" is about; the other crash runs use a
short lease to stay quick.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from agent.access import SessionRef
from tests.support.crashes import crash_mid_turn
from tests.support.harness import Stack, Tab
from tests.support.model_server import ScriptedModelServer

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]


def test_a_pool_child_killed_mid_model_call_is_told_within_45_s_at_the_production_lease(
    stack: Stack,
    tabs: Callable[..., Tab],
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    figure: Callable[[str, float], None],
) -> None:
    crash_mid_turn(stack, tabs, ref.session_key, chat, model_server, figure, kill="child", during="model")
