"""Staff's page of Telegram links: who connected which Telegram account and when, and revoking a link.

Read-only but for the revoke action; the Telegram chat's id never shows (it is how to reach the person).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..models import TelegramLink
from ..telegram import links
from .permissions import MANAGE, ReadOnlyMixin

if TYPE_CHECKING:  # Django's admin classes are generic in its stubs only
    _TelegramLinkBase = admin.ModelAdmin[TelegramLink]
else:
    _TelegramLinkBase = admin.ModelAdmin


class LiveFilter(admin.SimpleListFilter):
    title = _("live")
    parameter_name = "live"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("yes", _("Yes")), ("no", _("No"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[TelegramLink]) -> QuerySet[TelegramLink]:
        if self.value() == "yes":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "no":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(TelegramLink)
class TelegramLinkAdmin(ReadOnlyMixin, _TelegramLinkBase):
    list_display = ["user", "name", "created_at", "revoked_at", "live"]
    list_filter = [LiveFilter]
    search_fields = ["user__username", "user__email", "name"]
    fields = readonly_fields = ("user", "name", "language", "created_at", "revoked_at")
    list_select_related = ["user"]
    actions = ["revoke"]

    @admin.display(boolean=True, description=_("live"))
    def live(self, obj: TelegramLink) -> bool:
        return obj.revoked_at is None

    @admin.action(description=_("Revoke the selected links"), permissions=["manage"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[TelegramLink]) -> None:
        """What runs for a revoked link stops at its next step; the user can connect again from the site."""
        count = links.revoke_where(pk__in=list(queryset.values_list("pk", flat=True)))
        message = ngettext("%(count)d link revoked.", "%(count)d links revoked.", count) % {"count": count}
        self.message_user(request, message, messages.SUCCESS)

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(MANAGE))
