"""A worker killed mid-turn: the chat freed, the `interrupted` notice stored, every open tab told.

SIGKILL goes to the pool child that runs the turn (the prefork parent lives on
and forks a new one) or to the whole process group (the worker is gone and a
supervisor starts it again). Beat queues the sweep every 10 s; these runs
use a 6 s lease (``QUICK_SETTINGS``, the same in every process) so that they
stay short, and ``test_crash_at_defaults`` measures the production lease once.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from agent.access import SessionRef
from tests.support.crashes import crash_mid_turn
from tests.support.harness import QUICK_SETTINGS, Stack, Tab
from tests.support.model_server import ScriptedModelServer

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]

AGENT_SETTINGS = QUICK_SETTINGS


@pytest.mark.parametrize("during", ["model", "tool"])
@pytest.mark.parametrize("kill", ["child", "group"])
def test_a_killed_worker_frees_the_chat_and_every_tab_is_told(
    stack: Stack,
    tabs: Callable[..., Tab],
    ref: SessionRef,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    figure: Callable[[str, float], None],
    kill: str,
    during: str,
) -> None:
    crash_mid_turn(stack, tabs, ref.session_key, chat, model_server, figure, kill=kill, during=during)
