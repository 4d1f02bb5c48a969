"""The rolling 24-hour cost caps (a user's, the site's), checked at a turn's admission and again
before every model call, also as columns of the statement a turn's check runs; and the caps as
set, a user's own first, which the turn caps read too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Case, DecimalField, F, Func, OuterRef, Subquery, Sum, When
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThan
from django.utils import timezone

from ..core.conf import agent_settings
from ..core.errors import BudgetExceeded
from ..core.statements import slot
from ..models import UNREAD, AgentSettings, AIRequest, UserSettings

WINDOW = timedelta(hours=24)


def check(user: Any, caps: dict[str, Any] | None = None) -> None:
    """The cost caps, checked again before every model call of a turn."""
    limit = limit_reached(user, caps)
    if limit is not None:
        raise BudgetExceeded(limit=limit)


def limit_reached(user: Any, caps: dict[str, Any] | None = None) -> str | None:
    """The cost cap the user's or the site's spending in the window has reached, if any."""
    caps = caps or caps_for(user)
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
    as ``caps_for`` picks it, and what was spent in the window only where that cap is set. Filled by
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


def caps_for(user: Any, *, site: AgentSettings | None = None, user_settings: Any = UNREAD) -> dict[str, Any]:
    """The user's caps for the window: their own settings first, then the site's, then ``AGENT``'s.

    ``site`` and ``user_settings`` save a query each when the caller already read the rows (None
    for ``user_settings``: the user has none)."""
    site = site or AgentSettings.current()
    own = UserSettings.objects.filter(user=user).first() if user_settings is UNREAD else user_settings

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


def _spent(**filters: Any) -> Decimal:
    total = AIRequest.objects.filter(**filters).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal(0)
