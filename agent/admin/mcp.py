"""Staff's page of MCP tokens: whose, named what, live until when, last used, how many calls; revoking them.

Read-only but for the revoke action: a token is made by its user on "My assistant" (or in code), and
its secret exists only there, once; neither it nor its digest is shown here. The journal of calls made
with a token lists each call's method, tool and outcome, never its arguments or results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..mcp import tokens
from ..models import McpCall, McpToken
from .permissions import MANAGE, ReadOnlyMixin

if TYPE_CHECKING:  # Django's admin classes are generic in its stubs only
    _McpTokenBase = admin.ModelAdmin[McpToken]
    _McpCallBase = admin.ModelAdmin[McpCall]
else:
    _McpTokenBase = _McpCallBase = admin.ModelAdmin


class LiveTokenFilter(admin.SimpleListFilter):
    title = _("live")
    parameter_name = "live"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("yes", _("Yes")), ("no", _("No"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[McpToken]) -> QuerySet[McpToken]:
        live = Q(revoked_at__isnull=True, expires_at__gt=timezone.now())
        if self.value() == "yes":
            return queryset.filter(live)
        if self.value() == "no":
            return queryset.exclude(live)
        return queryset


@admin.register(McpToken)
class McpTokenAdmin(ReadOnlyMixin, _McpTokenBase):
    list_display = ["name", "user", "created_at", "expires_at", "last_used_at", "calls", "live"]
    list_filter = [LiveTokenFilter]
    search_fields = ["user__username", "user__email", "name"]
    fields = readonly_fields = ("user", "name", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_select_related = ["user"]
    actions = ["revoke"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpToken]:
        rows: QuerySet[McpToken] = super().get_queryset(request)
        return rows.annotate(call_count=Count("calls"))

    @admin.display(description=_("calls"), ordering="call_count")
    def calls(self, obj: Any) -> int:
        return int(obj.call_count)

    @admin.display(boolean=True, description=_("live"))
    def live(self, obj: McpToken) -> bool:
        return obj.revoked_at is None and obj.expires_at > timezone.now()

    @admin.action(description=_("Revoke the selected tokens"), permissions=["manage"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[McpToken]) -> None:
        """A revoked token's next call is refused; its user can make a new one on "My assistant"."""
        count = tokens.revoke_where(pk__in=list(queryset.values_list("pk", flat=True)))
        message = ngettext("%(count)d token revoked.", "%(count)d tokens revoked.", count) % {"count": count}
        self.message_user(request, message, messages.SUCCESS)

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(MANAGE))


@admin.register(McpCall)
class McpCallAdmin(ReadOnlyMixin, _McpCallBase):
    list_display = ["at", "token_name", "user", "client", "method", "tool_name", "outcome"]
    list_filter = ["method", "outcome"]
    search_fields = ["token_name", "user__username", "tool_name", "client"]
    fields = readonly_fields = ("at", "token", "token_name", "user", "client", "method", "tool_name", "outcome")
    list_select_related = ["user"]
    date_hierarchy = "at"
