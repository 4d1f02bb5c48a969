"""The check: one actor's statement run, and the row it reads judged, in the order of the ladder.

``prepare_check`` builds the statement for an actor (``statement``) and binds its credential;
``Check.judge`` turns the row into a ``Scope`` or a ``Refusal``, through the rules a row is judged by
(``rules``), and ``Check.gate`` says the same in SQL, so a turn's store can carry the check in its own
statement. ``authorize_session`` and ``authorize_with`` run it alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.db import connections
from django.utils import timezone

from ..core import errors
from ..core.conf import agent_settings
from ..core.statements import Columns, Statement
from .actors import (
    MCP_PERMISSION,
    TELEGRAM_PERMISSION,
    USE_PERMISSION,
    Actor,
    McpRef,
    Scope,
    SessionRef,
    TelegramRef,
    language_for,
)
from .rules import Accepted, check_session, check_user
from .statement import (
    MASK_BITS,
    MCP,
    MCP_OAUTH,
    OTHER_SESSION,
    SQL_SESSION,
    TELEGRAM,
    checked_permissions,
    held_permissions,
    session_kind,
    statement_for,
)


def authorize_session(actor: Actor, *, impersonated: bool) -> Scope:
    """Impersonation, the live actor and the rights: the session (or link) may use the assistant now."""
    return authorize_with(actor, impersonated=impersonated)[0]


def authorize_with(
    actor: Actor,
    *,
    impersonated: bool,
    annotations: Columns | dict[str, Any] | None = None,
    values: dict[str, Any] | None = None,
) -> tuple[Scope, dict[str, Any]]:
    """Checks 1-3, read in one SQL statement, with the caller's own ``annotations`` on the user row.

    One statement reads the session row, the user with their settings, the site switch and the
    permissions the assistant asks about (``agent.use_agent`` and every tool's, in one subquery),
    so a turn can re-check before each step at the cost of one round trip. Its SQL is compiled
    once per thread and kind of caller (``Columns``); each call binds its own values (``slot``)
    and reads every row afresh. A site whose sessions or permissions live elsewhere (another
    session engine, another auth backend) gets the same checks through its engine and
    ``has_perm``, at the cost of more queries.
    """
    check = prepare_check(actor, impersonated=impersonated, annotations=annotations, values=values)
    with connections[check.statement.db].cursor() as cursor:
        cursor.execute(check.sql, check.params)
        return check.judge(cursor.fetchone())


@dataclass
class Check:
    """The ladder's statement for one actor, ready to run alone or inside a caller's own statement
    (``sql`` and ``params``), and the judgement of the row it reads (``judge``)."""

    actor: Actor
    kind: str
    checked: tuple[str, ...]
    statement: Statement
    params: list[Any]

    @property
    def sql(self) -> str:
        return str(self.statement.sql)

    def judge(self, row: Any, accepted: Accepted | None = None) -> tuple[Scope, dict[str, Any]]:
        """The scope the row allows, or the refusal it calls for. With ``accepted``, a session's
        data and password hash equal to those of a check that passed are not decoded again (the
        verdict on them cannot differ); ``accepted`` then learns the ones this row passes with."""
        from ..models import AgentSettings

        actor = self.actor
        user = self.statement.build(row)
        if isinstance(actor, TelegramRef):
            if user is None or not user.agent_link_live:
                raise errors.SessionGone()  # the link was revoked, or its user is gone
            check_user(user, {})
        elif isinstance(actor, McpRef):
            if user is None:
                raise errors.SessionGone()  # no live token with this secret
            actor = replace(
                actor,
                user_id=user.pk,
                token_id=user.agent_token_id,
                token_name=user.agent_token_name or "",
                application_id=getattr(user, "agent_application_id", None),
            )
            check_user(user, {})
        elif accepted is not None and user is not None and accepted.covers(user):
            pass  # the same session data and password a check of this turn has passed on
        else:
            check_session(actor, user, data_in_row=self.kind == SQL_SESSION)
            if accepted is not None:
                accepted.learn(user)
        site_enabled = user.agent_site_enabled
        if site_enabled is None:
            site_enabled = AgentSettings.current().enabled
        checked = self.checked
        permissions = None
        if checked:
            permissions = (
                frozenset(checked) if (user.is_active and user.is_superuser) else held_permissions(user, checked)
            )
        user_settings = user.agent_settings if self.statement.found(row, "agent_settings") else None
        scope = Scope(
            actor=actor,
            user=user,
            language=language_for(user_settings),
            user_settings=user_settings,
            checked=frozenset(checked),
            permissions=permissions,
        )
        if not site_enabled or not scope.has_perm(USE_PERMISSION):
            raise errors.Forbidden()
        if isinstance(actor, TelegramRef) and not scope.has_perm(TELEGRAM_PERMISSION):
            raise errors.Forbidden()
        if isinstance(actor, McpRef) and not scope.has_perm(MCP_PERMISSION):
            raise errors.Forbidden()
        if user_settings is not None and user_settings.enabled is False:
            raise errors.Forbidden()
        return scope, {name: getattr(user, name) for name in self.statement.names}

    def gate(self, accepted: Accepted) -> tuple[str, list[Any]] | None:
        """An SQL condition on the statement's columns (named ``agent_check``) that holds only when
        ``judge`` would pass the row without a Python step: the actor is live on the very session
        data and password hash ``accepted`` holds, the user active, the site and their assistant
        on, ``agent.use_agent`` (and ``agent.use_telegram`` for a link) held. None where a check
        needs Python every time (another session engine or auth backend, the site's own checks,
        a session hash or impersonation detector of its own), or before ``accepted`` knows a
        session's data. False never lets a refused row through;
        it may refuse a live one (a session saved since), which ``judge`` then passes."""
        gated = "agent_gate_active" in self.statement.annotations
        if not gated or not self.checked or agent_settings.SCOPE_CHECKS or self.kind in (OTHER_SESSION, MCP, MCP_OAUTH):
            return None
        conditions = [
            "agent_check.agent_gate_active",
            "agent_check.agent_site_enabled",
            "agent_check.agent_gate_assistant_on",
        ]
        params: list[Any] = []
        needed: tuple[str, ...]
        if self.kind == TELEGRAM:
            conditions.append("agent_check.agent_link_live")
            needed = (USE_PERMISSION, TELEGRAM_PERMISSION)
        else:
            if accepted.session_data is None:
                return None
            conditions += ["agent_check.agent_session_data = %s", "agent_check.agent_gate_password = %s"]
            params += [accepted.session_data, accepted.password]
            needed = (USE_PERMISSION,)
        for permission in needed:
            number, bit = divmod(self.checked.index(permission), MASK_BITS)
            conditions.append(
                f"(agent_check.agent_gate_superuser OR agent_check.agent_held_{number} & {1 << bit} <> 0)"
            )
        return " AND ".join(conditions), params


def prepare_check(
    actor: Actor,
    *,
    impersonated: bool,
    annotations: Columns | dict[str, Any] | None = None,
    values: dict[str, Any] | None = None,
) -> Check:
    """The ladder's statement for ``actor`` with the caller's ``annotations``, its values bound;
    refuses at once what needs no reading (an impersonating request, no one signed in)."""
    if impersonated:
        raise errors.Impersonated()
    if isinstance(actor, TelegramRef):
        kind = TELEGRAM
        if actor.user_id is None:
            raise errors.SessionGone()
    elif isinstance(actor, McpRef):
        kind = MCP_OAUTH if actor.oauth else MCP
        if not actor.digest:
            raise errors.SessionGone()
    elif isinstance(actor, SessionRef) and actor.user_id is not None and actor.session_key:
        kind = session_kind()
    else:
        raise errors.SessionGone()
    checked = checked_permissions()
    statement = statement_for(kind, checked, annotations)
    credential: dict[str, Any]
    if isinstance(actor, TelegramRef):
        credential = {"link": actor.link_id}
    elif isinstance(actor, McpRef):
        credential = {"token": actor.digest}
    else:
        credential = {"session_key": actor.session_key}
    params = statement.bind({**(values or {}), "user": actor.user_id, "now": timezone.now(), **credential})
    return Check(actor, kind, checked, statement, params)
