"""The journal of model calls for staff, with its cost report, endpoint health and CSV export."""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..models import AIRequest
from .permissions import MANAGE, ReadOnlyMixin
from .reports import cost_charts, endpoint_health, journal_csv, telegram_health

if TYPE_CHECKING:  # Django's admin classes are generic in its stubs only
    _AIRequestBase = admin.ModelAdmin[AIRequest]
else:
    _AIRequestBase = admin.ModelAdmin


@admin.register(AIRequest)
class AIRequestAdmin(ReadOnlyMixin, _AIRequestBase):
    list_display = [
        "created_at",
        "user",
        "task",
        "model",
        "status",
        "error_code",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "latency_ms",
        "tools_offered",
        "tools_bytes",
    ]
    list_filter = ["status", "source", "task", "error_code"]
    search_fields = ["user__username", "model"]
    exclude = ["captured"]
    date_hierarchy = "created_at"
    change_list_template = "admin/agent/airequest/change_list.html"

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("cost/", wrap(self.cost_view), name="agent_airequest_cost"),
            path("health/", wrap(self.health_view), name="agent_airequest_health"),
            path("export/", wrap(self.export_view), name="agent_airequest_export"),
            *super().get_urls(),
        ]

    def _staff_only(self, request: HttpRequest) -> None:
        if not request.user.has_perm(MANAGE):
            raise PermissionDenied

    def cost_view(self, request: HttpRequest) -> HttpResponse:
        """Cost and turns per user and per day for the last 30 days, as SVG drawn here (no script, no CDN)."""
        self._staff_only(request)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Cost and turns, last 30 days"),
            "opts": self.model._meta,
            **cost_charts(timezone.localdate()),
        }
        return TemplateResponse(request, "admin/agent/airequest/cost.html", context)

    def health_view(self, request: HttpRequest) -> HttpResponse:
        """Each endpoint over the last 24 hours: calls, error rate by code, p50/p95 latency."""
        self._staff_only(request)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Endpoint health, last 24 hours"),
            "opts": self.model._meta,
            "endpoints": endpoint_health(timezone.now() - timedelta(hours=24)),
            "telegram": telegram_health(),
        }
        return TemplateResponse(request, "admin/agent/airequest/health.html", context)

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        """The journal from ``start`` to ``end`` (dates, both included) as CSV; without them, the form."""
        self._staff_only(request)
        try:
            start = date.fromisoformat(request.GET["start"])
            end = date.fromisoformat(request.GET["end"])
        except (KeyError, ValueError):
            context = {
                **self.admin_site.each_context(request),
                "title": _("Export the journal as CSV"),
                "opts": self.model._meta,
                "today": timezone.localdate().isoformat(),
                "invalid": bool(request.GET),
            }
            return TemplateResponse(request, "admin/agent/airequest/export.html", context)
        response = StreamingHttpResponse(journal_csv(start, end), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="agent-journal-{start}-{end}.csv"'
        return response

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = response.context_data if isinstance(response, TemplateResponse) else None
        changelist = (context or {}).get("cl")  # none on a redirect or a refusal
        if context is not None and changelist is not None:
            context["cost_totals"] = (
                changelist.queryset.annotate(day=TruncDate("created_at"))
                .values("day", "user__username")
                .annotate(
                    calls=Count("id"),
                    cost=Sum("cost_usd"),
                    tokens_in=Sum("input_tokens"),
                    tokens_out=Sum("output_tokens"),
                )
                .order_by("-day", "-cost")[:100]
            )
        return response
