"""Admission and budget: rolling 24-hour caps, and the off-purpose block."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Case, DecimalField, F, Func, OuterRef, Subquery, Sum, When
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThan
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from ..conf import agent_settings
from ..errors import Blocked, BudgetExceeded
from ..models import AgentSettings, AIRequest, OffPurposeFlag, Turn, UserSettings
from ..statements import slot

WINDOW = timedelta(hours=24)
MARKER_OPEN, MARKER_CLOSE = "⟦off_purpose:", "⟧"
"""The model flags an off-purpose request with ``⟦off_purpose: <nonce> <reason>⟧`` at the very end of
its answer, ``<nonce>`` being the one its turn's system prompt gave (the prompt teaches it);
``cut_marker`` reads it."""

NONCE_BYTES = 8


def marker_nonce() -> str:
    """A fresh nonce for one turn's system prompt. Only a marker that carries it flags the turn:
    a file or a tool result never sees the prompt, so a marker it makes the model copy flags nothing."""
    return secrets.token_hex(NONCE_BYTES)


def marker_example(nonce: str) -> str:
    """The marker as the prompt shows it to the model."""
    return f"{MARKER_OPEN} {nonce} <reason>{MARKER_CLOSE}"


def admit(user: Any, task: str) -> str:
    """An admission id for a new turn, or ``BudgetExceeded`` / ``Blocked``."""
    since = timezone.now() - WINDOW
    if OffPurposeFlag.objects.filter(user=user, created_at__gte=since).count() >= agent_settings.OFF_PURPOSE_LIMIT:
        raise Blocked()
    caps = _caps(user)
    if (
        caps["turns_per_user"]
        and Turn.objects.filter(user=user, created_at__gte=since).count() >= caps["turns_per_user"]
    ):
        raise BudgetExceeded(limit="turns_per_user")
    check(user, caps)
    return uuid.uuid4().hex


def check(user: Any, caps: dict[str, Any] | None = None) -> None:
    """The cost caps, checked again before every model call of a turn."""
    limit = limit_reached(user, caps)
    if limit is not None:
        raise BudgetExceeded(limit=limit)


def limit_reached(user: Any, caps: dict[str, Any] | None = None) -> str | None:
    """The cost cap the user's or the site's spending in the window has reached, if any."""
    caps = caps or _caps(user)
    since = timezone.now() - WINDOW
    if caps["cost_per_user"] and _spent(user=user, created_at__gte=since) >= caps["cost_per_user"]:
        return "cost_per_user"
    if caps["cost_site"] and _spent(created_at__gte=since) >= caps["cost_site"]:
        return "cost_site"
    return None


@dataclass(frozen=True)
class Verdict:
    """The cost caps as the caller checked them just now: ``limit`` is the cap reached, or None.

    The turn reads them in its re-check before each model call (``budget_columns``), so
    ``complete`` need not read them again.
    """

    limit: str | None = None


_MONEY: DecimalField[Decimal, Decimal] = DecimalField(max_digits=20, decimal_places=8)


def budget_columns() -> dict[str, Any]:
    """``limit_reached`` as columns of a statement on the user row (``statements.Columns``): each cap
    as ``_caps`` picks it, and what was spent in the window only where that cap is set. Filled by
    ``budget_values()``; read back by ``verdict``."""
    site = AgentSettings.objects.order_by()
    own = UserSettings.objects.filter(user=OuterRef("pk"))
    per_user = Coalesce(
        Subquery(own.values("daily_cost_cap")[:1]),
        Subquery(site.values("daily_cost_per_user")[:1]),
        slot("agent_cost_per_user", _MONEY),
        output_field=_MONEY,
    )
    per_site = Coalesce(
        Subquery(site.values("daily_cost_site")[:1]), slot("agent_cost_site", _MONEY), output_field=_MONEY
    )
    window = AIRequest.objects.filter(created_at__gte=slot("agent_budget_since")).order_by()
    total = Func(F("cost_usd"), function="SUM", output_field=_MONEY)

    def spent(rows: Any) -> Subquery:
        return Subquery(rows.annotate(agent_total=total).values("agent_total")[:1], output_field=_MONEY)

    return {
        "agent_cap_user": per_user,
        "agent_cap_site": per_site,
        "agent_spent_user": Case(
            When(GreaterThan(per_user, 0), then=spent(window.filter(user=OuterRef("pk")))), output_field=_MONEY
        ),
        "agent_spent_site": Case(When(GreaterThan(per_site, 0), then=spent(window)), output_field=_MONEY),
    }


def budget_values() -> dict[str, Any]:
    """The values ``budget_columns`` binds at each run: the settings' caps and the window's start."""
    return {
        "agent_cost_per_user": Decimal(str(agent_settings.DAILY_COST_PER_USER)),
        "agent_cost_site": Decimal(str(agent_settings.DAILY_COST_SITE)),
        "agent_budget_since": timezone.now() - WINDOW,
    }


def verdict(row: dict[str, Any]) -> Verdict:
    """``limit_reached`` from a row with ``budget_columns``."""
    for limit, cap, spent in (
        ("cost_per_user", row["agent_cap_user"], row["agent_spent_user"]),
        ("cost_site", row["agent_cap_site"], row["agent_spent_site"]),
    ):
        if cap and (spent or 0) >= cap:
            return Verdict(limit)
    return Verdict()


def cut_marker(content: str, nonce: str) -> tuple[str, str | None]:
    """The answer without a marker at its very end, and the marker's reason when it carries this
    turn's ``nonce`` (None: no flag). The reason is returned without the nonce.

    A marker at the end without the nonce is cut all the same (the user never sees it) but flags
    nothing; a marker anywhere else is left in the text and flags nothing.
    """
    stripped = content.rstrip()
    start = stripped.rfind(MARKER_OPEN)
    if start < 0 or not stripped.endswith(MARKER_CLOSE) or MARKER_CLOSE in stripped[start:-1]:
        return content, None
    text = stripped[:start].rstrip()
    given, _space, reason = stripped[start + len(MARKER_OPEN) : -1].strip().partition(" ")
    if not nonce or not constant_time_compare(given, nonce):
        return text, None
    return text, reason.strip()


def draft_text(text: str) -> str:
    """The answer so far as a tab may see it: a marker the model has begun at its end is held back."""
    start = text.rfind(MARKER_OPEN)
    if start >= 0:
        return text[:start].rstrip()
    start = text.rfind(MARKER_OPEN[0])
    if start >= 0 and MARKER_OPEN.startswith(text[start:]):
        return text[:start].rstrip()
    return text


def report_off_purpose(user: Any, turn_ref: Any, reason: str) -> bool:
    """Flag a turn as off purpose; one flag per turn. True when this call flagged it."""
    try:
        with transaction.atomic():
            OffPurposeFlag.objects.create(user=user, turn_ref=turn_ref, reason=(reason or "").strip()[:300])
    except IntegrityError:
        return False
    return True


def _spent(**filters: Any) -> Decimal:
    total = AIRequest.objects.filter(**filters).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal(0)


def _caps(user: Any) -> dict[str, Any]:
    site = AgentSettings.current()
    own = UserSettings.objects.filter(user=user).first()

    def pick(user_value: Any, site_value: Any, default: Any) -> Any:
        for value in (user_value, site_value):
            if value is not None:
                return value
        return default

    return {
        "cost_per_user": Decimal(
            str(pick(own and own.daily_cost_cap, site.daily_cost_per_user, agent_settings.DAILY_COST_PER_USER))
        ),
        "turns_per_user": int(
            pick(own and own.daily_turns_cap, site.daily_turns_per_user, agent_settings.DAILY_TURNS_PER_USER)
        ),
        "cost_site": Decimal(str(pick(None, site.daily_cost_site, agent_settings.DAILY_COST_SITE))),
    }
