"""Limits that explain themselves: which cap, how much is used, and when the rolling
window frees up, for the "My assistant" panel and for a refusal's params and message.

The caps are checked in ``costs`` and ``admission``, the turns at once by the slots of
``agent.turns.locks``; this module only reads where each one stands.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Callable

from django.db.models import Count, F, QuerySet, Sum, Window
from django.utils import formats, timezone
from django.utils.translation import gettext, gettext_lazy

from ..core.conf import agent_settings
from ..core.errors import Refusal
from ..models import AIRequest, OffPurposeFlag, Turn
from . import costs
from .standing import Standing

COST_PER_USER, COST_SITE, TURNS_PER_USER = "cost_per_user", "cost_site", "turns_per_user"
OFF_PURPOSE, TURNS_AT_ONCE = "off_purpose", "turns_at_once"


def usage(user: Any, only: tuple[str, ...] | None = None) -> dict[str, Standing[Any]]:
    """Where the user stands against every cap now (or those in ``only``): their cost and turns in
    the rolling 24 hours (personal overrides included), the site's cost, the off-purpose flags and
    the turns running."""
    caps = costs.caps_for(user)  # the caps as admission reads them, overrides first
    since = timezone.now() - costs.WINDOW
    readers: dict[str, Callable[[], Standing[Any]]] = {
        COST_PER_USER: lambda: _standing(
            COST_PER_USER,
            caps["cost_per_user"],
            AIRequest.objects.filter(user=user, created_at__gte=since),
            Sum("cost_usd"),
        ),
        TURNS_PER_USER: lambda: _standing(
            TURNS_PER_USER, caps["turns_per_user"], Turn.objects.filter(user=user, created_at__gte=since), Count("pk")
        ),
        COST_SITE: lambda: _standing(
            COST_SITE,
            caps["cost_site"],
            AIRequest.objects.filter(created_at__gte=since),
            Sum("cost_usd"),
            always=False,
        ),
        OFF_PURPOSE: lambda: _standing(
            OFF_PURPOSE,
            agent_settings.OFF_PURPOSE_LIMIT,
            OffPurposeFlag.objects.filter(user=user, created_at__gte=since),
            Count("pk"),
        ),
        TURNS_AT_ONCE: lambda: Standing(
            TURNS_AT_ONCE,
            agent_settings.MAX_TURNS_PER_USER,
            Turn.objects.filter(user=user, status__in=Turn.LIVE).count(),
        ),
    }
    return {limit: read() for limit, read in readers.items() if only is None or limit in only}


def standing(user: Any, limit: str) -> Standing[Any]:
    """One limit of ``usage``."""
    return usage(user, only=(limit,))[limit]


def explained(refusal: Refusal, user: Any) -> Refusal:
    """The same refusal with the standing of the limit it names (budget, flags, turns at once)."""
    limit = {"off_purpose_blocked": OFF_PURPOSE, "too_many_turns": TURNS_AT_ONCE}.get(
        refusal.code, refusal.params.get("limit")
    )
    if limit not in _MESSAGES:
        return refusal
    params = standing(user, limit).params()
    explained = type(refusal)(**{**refusal.params, **params, "message": message(params)})
    explained.__cause__ = refusal.__cause__
    return explained


_MESSAGES = {
    COST_PER_USER: gettext_lazy("You have used $%(used)s of your $%(cap)s for 24 hours. It frees up at %(frees_at)s."),
    COST_SITE: gettext_lazy("The assistant has used the site's $%(cap)s for 24 hours. It frees up at %(frees_at)s."),
    TURNS_PER_USER: gettext_lazy(
        "You have used %(used)s of your %(cap)s turns for 24 hours. The next one frees up at %(frees_at)s."
    ),
    OFF_PURPOSE: gettext_lazy(
        "The assistant is paused for you after %(used)s requests it is not for in 24 hours (the limit is "
        "%(cap)s). It is back at %(frees_at)s."
    ),
    TURNS_AT_ONCE: gettext_lazy(
        "You have %(used)s turns running at once, the most allowed is %(cap)s. Wait for one to finish."
    ),
}


def message(params: dict[str, Any]) -> str | None:
    """The limit a refusal names, in the active language (None: its params name none)."""
    template = _MESSAGES.get(params.get("limit") or "")
    if template is None or "cap" not in params:
        return None
    frees_at = params.get("frees_at")
    when = _when(datetime.fromisoformat(frees_at)) if frees_at else gettext("a later time")
    return str(template) % {"used": _amount(params["used"]), "cap": _amount(params["cap"]), "frees_at": when}


def _when(moment: datetime) -> str:
    """The date and time in the active language's short form (no trailing period to clash with the sentence's)."""
    local = timezone.localtime(moment)
    return f"{formats.date_format(local, 'SHORT_DATE_FORMAT')} {formats.time_format(local, 'H:i')}"


def _amount(value: Any) -> str:
    """A cap or a use as people read it: money to the cent, counts whole."""
    number = Decimal(str(value))
    if number == number.to_integral_value():
        return str(number.quantize(Decimal(1)))
    return formats.number_format(number.quantize(Decimal("0.01")), 2)


def _standing(limit: str, cap: Any, rows: QuerySet[Any], amount: Any, *, always: bool = True) -> Standing[Any]:
    """How much of ``rows`` counts against ``cap``, and when the oldest rows leave the window far
    enough to bring it under (each row leaves 24 hours after it was made)."""
    if not cap and not always:
        return Standing(limit, cap, 0)
    used = rows.aggregate(total=amount)["total"] or 0
    if isinstance(cap, Decimal):
        used = Decimal(used)
    if not cap or used < cap:
        return Standing(limit, cap, used)
    running = rows.annotate(agent_running=Window(amount, order_by=[F("created_at").asc(), F("pk").asc()]))
    first = (
        running.filter(agent_running__gt=used - cap)
        .order_by("created_at", "pk")
        .values_list("created_at", flat=True)
        .first()
    )
    return Standing(limit, cap, used, first + costs.WINDOW if first is not None else None)
