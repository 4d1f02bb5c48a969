"""Revocation mid-answer, every kind: no tool or model step starts after it, and every socket closes.

The model answers with three slow reads (``notes_wait``). While the first runs,
the session loses its right to the assistant. Then: no second read and no
second model call, the turn ends with its notice, and both the chat's tab and
an idle tab are closed (4401): within 1 s where a signal tells the sockets,
within ``SOCKET_RECHECK_S`` (3 s here) where only the sockets' own re-check
can notice (a session row deleted or expired without a logout).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, Callable

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.models import Session
from django.utils import timezone

from agent.models import AgentSettings, Message, Turn
from tests.support.harness import QUICK_SETTINGS, Stack, Tab
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.sessions import login
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]

AGENT_SETTINGS = QUICK_SETTINGS
RECHECK_S = QUICK_SETTINGS["SOCKET_RECHECK_S"]
SIGNAL_CLOSE_S = 1.0
RECHECK_CLOSE_S = RECHECK_S + 1.0  # the re-check's period, then the check itself on a busy machine
CLOSE_SESSION_ENDED = 4401


def use_agent() -> Permission:
    return Permission.objects.get(content_type__app_label="agent", codename="use_agent")


def logout(user: Any, key: str, stack: Stack, group: Group) -> None:
    assert stack.post_logout(key) == 200


def change_password(user: Any, key: str, stack: Stack, group: Group) -> None:
    user.set_password("a-new-password-9")
    user.save()


def remove_user_permission(user: Any, key: str, stack: Stack, group: Group) -> None:
    user.user_permissions.remove(use_agent())


def remove_from_permission_side(user: Any, key: str, stack: Stack, group: Group) -> None:
    use_agent().user_set.remove(user)


def group_loses_permission(user: Any, key: str, stack: Stack, group: Group) -> None:
    group.permissions.remove(use_agent())


def user_leaves_group(user: Any, key: str, stack: Stack, group: Group) -> None:
    user.groups.remove(group)


def delete_session_row(user: Any, key: str, stack: Stack, group: Group) -> None:
    Session.objects.filter(session_key=key).delete()


def expire_session(user: Any, key: str, stack: Stack, group: Group) -> None:
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))


def switch_assistant_off(user: Any, key: str, stack: Stack, group: Group) -> None:
    row = AgentSettings.current()
    row.enabled = False
    row.save()


# kind: (revoke, the permission comes through a group, only the re-check can notice, the turn's notice)
KINDS: dict[str, tuple[Callable[[Any, str, Stack, Group], None], bool, bool, str]] = {
    "logout": (logout, False, False, "session_ended"),
    "password_change": (change_password, False, False, "session_ended"),
    "user_permissions_remove": (remove_user_permission, False, False, "forbidden"),
    "perm_user_set_remove": (remove_from_permission_side, False, False, "forbidden"),
    "group_loses_permission": (group_loses_permission, True, False, "forbidden"),
    "user_leaves_group": (user_leaves_group, True, False, "forbidden"),
    "session_row_deleted": (delete_session_row, False, True, "session_ended"),
    "session_expired": (expire_session, False, True, "session_ended"),
    "assistant_switched_off": (switch_assistant_off, False, False, "forbidden"),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_after_a_revocation_no_step_starts_and_every_socket_closes(
    kind: str,
    stack: Stack,
    tabs: Callable[..., Tab],
    user: Any,
    chat: Any,
    endpoint: Any,
    model_server: ScriptedModelServer,
    figure: Callable[[str, float], None],
) -> None:
    revoke, through_group, recheck_only, notice = KINDS[kind]
    group = Group.objects.create(name="assistant users")
    if through_group:  # the assistant's permission comes through the group alone
        group.permissions.add(use_agent())
        user.groups.add(group)
        user.user_permissions.remove(use_agent())
    key = login(user)[1].session_key
    # given: a chat's tab and an idle tab of one session, and an answer with three slow reads under way
    stack.start("daphne", "worker")
    watching = tabs(key)
    watching.subscribe(chat.pk)
    idle = tabs(key)
    model_server.push(tool_calls(*[("notes_wait", {"seconds": 2})] * 3), answer("should never be asked"))
    turn = watching.send("read slowly")
    watching.message_frame(
        lambda view: view["role"] == "assistant" and view["tool_calls"], 30, "the answer with three reads"
    )
    # when: the session loses the assistant while the first read runs
    revoked = time.monotonic()
    revoke(user, key, stack, group)
    bound = RECHECK_CLOSE_S if recheck_only else SIGNAL_CLOSE_S
    problems = []
    for name, tab in (("chat tab", watching), ("idle tab", idle)):
        try:
            closed, code = tab.wait_closed(bound + 10)
        except AssertionError as still_open:
            problems.append(f"{name}: {still_open}")
            continue
        figure(f"{kind} -> {name} closed ({code})", closed - revoked)
        if code != CLOSE_SESSION_ENDED or closed - revoked > bound:
            problems.append(f"{name} closed with {code} after {closed - revoked:.2f} s (bound {bound} s)")
    # then: the turn ends without another tool or model step
    wait_until(lambda: Turn.objects.filter(pk=turn).exclude(status__in=Turn.LIVE).exists(), 30, "the turn to end")
    tools_run = Message.objects.filter(conversation=chat, role="tool").count()
    if tools_run > 1:
        problems.append(f"{tools_run} reads ran; at most the one under way at the revocation may")
    if len(model_server.requests) != 1:
        problems.append(f"{len(model_server.requests)} model calls; only the one before the revocation may")
    last = Message.objects.filter(conversation=chat).order_by("seq").last()
    if (last.role, last.notice_code) != ("notice", notice):
        problems.append(f"the turn's last message is {last.role} {last.notice_code!r}, not the {notice} notice")
    assert not problems, "\n".join(problems)
