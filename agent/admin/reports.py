"""What the journal and the turns add up to: cost and turns per user and day as SVG bar charts,
each endpoint's health, and the journal as CSV. Plain functions of the database, no requests."""

from __future__ import annotations

import csv
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Iterator

from django.db import connection
from django.db.models import Aggregate, Count, F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..ai.speech import SOURCE as SPEECH_SOURCE
from ..models import AIRequest, Endpoint, Lock, TelegramBot, TelegramLink, Turn
from ..telegram import bot
from ..turns import locks

CHART_DAYS = 30
CHART_USERS = 6
CHART_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#9c9c9c"]
CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_BOTTOM = 760, 220, 60, 30


def cost_charts(today: date) -> dict[str, Any]:
    """Two stacked bar charts (cost from the journal, turns from the turns), one bar a day, one
    colour per user (the busiest few, the rest together), and the table they are drawn from."""
    first = today - timedelta(days=CHART_DAYS - 1)
    since = timezone.make_aware(datetime.combine(first, time.min))
    cost_rows = (
        AIRequest.objects.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day", "user__username")
        .annotate(amount=Sum("cost_usd"))
        .order_by()
    )
    turn_rows = (
        Turn.objects.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day", "user__username")
        .annotate(amount=Count("id"))
        .order_by()
    )
    speech_rows = (
        AIRequest.objects.filter(created_at__gte=since, source=SPEECH_SOURCE)
        .annotate(day=TruncDate("created_at"))
        .values("day", "user__username")
        .annotate(amount=Sum("audio_seconds"))
        .order_by()
    )
    cost = {(r["day"], r["user__username"] or "—"): float(r["amount"] or 0) for r in cost_rows}
    speech = {(r["day"], r["user__username"] or "—"): (r["amount"] or 0) / 60 for r in speech_rows}
    turns = {(r["day"], r["user__username"] or "—"): float(r["amount"]) for r in turn_rows}
    days = [first + timedelta(days=n) for n in range(CHART_DAYS)]
    table = sorted({key for key in [*cost, *turns]}, key=lambda key: (key[0], key[1]), reverse=True)
    return {
        "cost_chart": _stacked_bars(days, cost, money=True),
        "turns_chart": _stacked_bars(days, turns, money=False),
        "rows": [
            {
                "day": d,
                "user": u,
                "cost": cost.get((d, u), 0),
                "turns": int(turns.get((d, u), 0)),
                "speech_minutes": speech.get((d, u), 0),
            }
            for d, u in table
        ],
    }


def _stacked_bars(days: list[date], values: dict[tuple[date, str], float], *, money: bool) -> dict[str, Any]:
    totals: dict[str, float] = {}
    for (_day, user), amount in values.items():
        totals[user] = totals.get(user, 0) + amount
    top = sorted(totals, key=lambda user: -totals[user])[:CHART_USERS]
    others = str(_("others"))
    series = [*top, others] if len(totals) > len(top) else top
    by_day: dict[date, dict[str, float]] = {day: {} for day in days}
    for (day, user), amount in values.items():
        if day in by_day:
            name = user if user in top else others
            by_day[day][name] = by_day[day].get(name, 0) + amount
    peak = max([sum(parts.values()) for parts in by_day.values()] + [0]) or 1
    plot_height = CHART_HEIGHT - CHART_BOTTOM - 10
    step = (CHART_WIDTH - CHART_LEFT) / len(days)
    bars = []
    for index, day in enumerate(days):
        bottom: float = CHART_HEIGHT - CHART_BOTTOM
        for number, name in enumerate(series):
            amount = by_day[day].get(name, 0)
            if not amount:
                continue
            height = amount / peak * plot_height
            bottom -= height
            label = f"{day} {name}: " + (f"${amount:.4f}" if money else f"{int(amount)}")
            bars.append(
                {
                    "x": round(CHART_LEFT + index * step + 1, 1),
                    "y": round(bottom, 1),
                    "width": round(step - 2, 1),
                    "height": round(height, 1),
                    "colour": CHART_COLOURS[number % len(CHART_COLOURS)],
                    "label": label,
                }
            )
    ticks = [
        {"x": round(CHART_LEFT + i * step + step / 2, 1), "label": day.strftime("%d.%m")}
        for i, day in enumerate(days)
        if i % 5 == 0
    ]
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "left": CHART_LEFT,
        "base": CHART_HEIGHT - CHART_BOTTOM,
        "label_y": CHART_HEIGHT - 10,
        "top_y": 14,
        "peak": f"${peak:.2f}" if money else str(int(peak)),
        "bars": bars,
        "ticks": ticks,
        "legend": [{"name": name, "colour": CHART_COLOURS[n % len(CHART_COLOURS)]} for n, name in enumerate(series)],
    }


ENDED_BY_US = ["interrupted", "deadline"]
"""The journal's codes for a call cut short by a stop or by the turn's deadline."""


def endpoint_health(since: datetime) -> list[dict[str, Any]]:
    """Per endpoint since ``since``: calls, errors by code with their rate, p50/p95 latency of the calls
    that answered. Refused calls never reached the endpoint, and calls our side ended (the user's
    Stop, the turn's deadline) say nothing of it: neither is counted."""
    rows = (
        AIRequest.objects.filter(created_at__gte=since)
        .exclude(status=AIRequest.Status.REFUSED)
        .exclude(status=AIRequest.Status.ERROR, error_code__in=ENDED_BY_US)
    )
    health: dict[Any, dict[str, Any]] = {}
    names = dict(Endpoint.objects.values_list("pk", "name"))
    for row in rows.values("endpoint_id").annotate(calls=Count("id")).order_by():
        health[row["endpoint_id"]] = {
            "name": names.get(row["endpoint_id"], "—"),
            "calls": row["calls"],
            "errors": [],
            "error_rate": 0.0,
            "p50": None,
            "p95": None,
        }
    failed = rows.filter(status=AIRequest.Status.ERROR).values("endpoint_id", "error_code", "http_status")
    for failure in failed.annotate(count=Count("id")).order_by("-count"):
        entry = health[failure["endpoint_id"]]
        code = failure["error_code"] + (f" ({failure['http_status']})" if failure["http_status"] else "")
        entry["errors"].append(
            {"code": code, "count": failure["count"], "rate": round(100 * failure["count"] / entry["calls"], 1)}
        )
    for entry in health.values():
        entry["error_rate"] = round(100 * sum(e["count"] for e in entry["errors"]) / entry["calls"], 1)
    answered = rows.filter(status=AIRequest.Status.SUCCESS)
    for endpoint_id, p50, p95 in _latency_percentiles(answered):
        health[endpoint_id]["p50"], health[endpoint_id]["p95"] = p50, p95
    return sorted(health.values(), key=lambda entry: -entry["calls"])


class _Percentile(Aggregate):
    """PostgreSQL's continuous percentile of a column, as an aggregate Django groups by."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def _latency_percentiles(rows: QuerySet[AIRequest]) -> list[tuple[Any, Any, Any]]:
    """(endpoint id, p50, p95) in milliseconds: in SQL on PostgreSQL, else read and sorted here."""
    if connection.vendor == "postgresql":
        found = (
            rows.values("endpoint_id")
            .annotate(p50=_Percentile(F("latency_ms"), fraction=0.5), p95=_Percentile(F("latency_ms"), fraction=0.95))
            .order_by()
        )
        return [(r["endpoint_id"], round(r["p50"]), round(r["p95"])) for r in found]
    latencies: dict[Any, list[int]] = {}
    for endpoint_id, latency in rows.values_list("endpoint_id", "latency_ms"):
        latencies.setdefault(endpoint_id, []).append(latency)
    result = []
    for endpoint_id, values in latencies.items():
        values.sort()
        result.append((endpoint_id, values[int(0.5 * (len(values) - 1))], values[int(0.95 * (len(values) - 1))]))
    return result


JOURNAL_COLUMNS = {
    "created_at": "created_at",
    "id": "id",
    "user_id": "user_id",
    "username": "user__username",
    "endpoint": "endpoint__name",
    "source": "source",
    "task": "task",
    "model": "model",
    "status": "status",
    "error_code": "error_code",
    "http_status": "http_status",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cost_usd": "cost_usd",
    "latency_ms": "latency_ms",
    "tools_offered": "tools_offered",
    "tools_bytes": "tools_bytes",
    "admission": "admission",
}
"""The export's columns and the fields they read: never captured content, attribution, or anything
of an endpoint but its name."""


JOURNAL_PAGE = 2000
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class _Echo:
    def write(self, value: str) -> str:
        return value


def journal_csv(start: date, end: date) -> Iterator[str]:
    """The journal's rows made from ``start`` to the end of ``end``, oldest first.

    Read a page at a time after the last row sent (``created_at``, ``id``): no server-side cursor,
    which a pooler in transaction mode would lose between two reads.
    """
    since = timezone.make_aware(datetime.combine(start, time.min))
    until = timezone.make_aware(datetime.combine(end + timedelta(days=1), time.min))
    writer = csv.writer(_Echo())
    yield writer.writerow(JOURNAL_COLUMNS)
    fields = list(JOURNAL_COLUMNS.values())
    at, pk = fields.index("created_at"), fields.index("id")
    rows = AIRequest.objects.filter(created_at__gte=since, created_at__lt=until).order_by("created_at", "id")
    page = rows
    while True:
        chunk = list(page.values_list(*fields)[:JOURNAL_PAGE])
        for row in chunk:
            yield writer.writerow([csv_cell(value) for value in row])
        if len(chunk) < JOURNAL_PAGE:
            return
        last_at, last_pk = chunk[-1][at], chunk[-1][pk]
        # the bound alone on the indexed column, so each page starts where the last one ended
        page = rows.filter(created_at__gte=last_at).filter(Q(created_at__gt=last_at) | Q(id__gt=last_pk))


def csv_cell(value: Any) -> Any:
    """A value as a spreadsheet should read it: times in ISO form, decimals written out, and text
    that a spreadsheet would run as a formula (it may come from a provider) quoted with ``'``."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def telegram_health() -> dict[str, Any] | None:
    """The site's bot as the workers and the reader last saw it; None when Telegram is off."""
    settings = bot.config()
    if settings is None:
        return None
    state = TelegramBot.objects.filter(pk=1).first() or TelegramBot()
    reading = Lock.objects.filter(name=locks.TELEGRAM_READER, expires_at__gt=timezone.now()).exists()
    return {
        "bot": settings.username,
        "mode": settings.mode,
        "reader": reading if settings.mode == "polling" else None,
        "last_update_at": state.last_update_at,
        "last_error_at": state.last_error_at,
        "last_error": state.last_error,
        "errors": state.errors,
        "links": TelegramLink.objects.filter(revoked_at__isnull=True).count(),
    }
