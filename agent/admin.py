"""Staff pages (SPEC §10), for users with ``agent.manage_agent``.

List pages never show a message's text, a tool's arguments or results, a
session key or an API key; message text needs ``agent.view_chat_content``.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from . import conversations
from .ai import AIError, complete
from .models import AgentSettings, AIRequest, Attachment, Confirmation, Conversation, Endpoint, Message, OffPurposeFlag, Turn, UserSettings
from .turns import monitor

MANAGE = "agent.manage_agent"
VIEW_CONTENT = "agent.view_chat_content"


class ManageAgentMixin:
    """Every page here is for ``agent.manage_agent`` holders."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(MANAGE)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return request.user.has_perm(MANAGE)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)


class ReadOnlyMixin(ManageAgentMixin):
    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class EndpointForm(forms.ModelForm):
    base_url = forms.URLField(label=_("base URL"), max_length=500, assume_scheme="https")
    api_key = forms.CharField(
        label=_("API key"), required=False, widget=forms.PasswordInput(render_value=False),
        help_text=_("Write-only: leave empty to keep the current key."),
    )
    clear_api_key = forms.BooleanField(label=_("Remove the stored key"), required=False)

    class Meta:
        model = Endpoint
        fields = "__all__"

    def clean_api_key(self) -> str:
        return self.cleaned_data["api_key"] or (self.instance.api_key if self.instance.pk else "")

    def save(self, commit: bool = True) -> Endpoint:
        if self.cleaned_data.get("clear_api_key"):
            self.instance.api_key = ""
        return super().save(commit)


@admin.register(Endpoint)
class EndpointAdmin(ManageAgentMixin, admin.ModelAdmin):
    form = EndpointForm
    list_display = ["name", "model", "base_url", "key", "enabled", "supports_tools", "supports_images"]
    list_filter = ["enabled"]
    search_fields = ["name", "model"]
    actions = ["test_call"]

    @admin.display(description=_("API key"))
    def key(self, obj: Endpoint) -> str:
        if obj.api_key:
            return "••••" + obj.api_key[-4:] if len(obj.api_key) > 12 else "••••"
        return f"${obj.api_key_env}" if obj.api_key_env else "—"

    @admin.action(description=_("Make a test call"))
    def test_call(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        for endpoint in queryset:
            try:
                answer = complete(endpoint, [{"role": "user", "content": "Reply with: ok"}], user=request.user,
                                  source="admin", task="agent.endpoint_test")
            except AIError as error:
                self.message_user(request, _("%(name)s: failed (%(code)s)") % {"name": endpoint, "code": error.code},
                                  messages.ERROR)
            else:
                self.message_user(request, _("%(name)s: answered in %(ms)d ms") % {"name": endpoint,
                                  "ms": answer.latency_ms}, messages.SUCCESS)


@admin.register(AgentSettings)
class AgentSettingsAdmin(ManageAgentMixin, admin.ModelAdmin):
    filter_horizontal = ["selectable_endpoints"]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        row = AgentSettings.current()
        return HttpResponseRedirect(reverse("admin:agent_agentsettings_change", args=[row.pk]))


@admin.register(UserSettings)
class UserSettingsAdmin(ManageAgentMixin, admin.ModelAdmin):
    list_display = ["user", "enabled", "language", "endpoint", "daily_cost_cap", "daily_turns_cap"]
    list_filter = ["enabled", "language"]
    search_fields = ["user__username", "user__email"]
    raw_id_fields = ["user"]

    def save_model(self, request: HttpRequest, obj: UserSettings, form: Any, change: bool) -> None:
        """An endpoint chosen here is staff's: it may be any endpoint, and the user cannot pick over it."""
        for field in ("endpoint", "picture_endpoint"):
            if field in form.changed_data or not change:
                chosen = getattr(obj, field) is not None
                setattr(obj, f"{field}_set_by", UserSettings.SetBy.STAFF if chosen else UserSettings.SetBy.NOBODY)
        super().save_model(request, obj, form, change)


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    ordering = ["-seq"]
    max_num = 0
    fields = ["seq", "role", "text", "tool_name", "tool_outcome", "notice_code", "model", "cost_usd", "created_at"]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).defer("tool_result", "tool_calls")

    @admin.display(description=_("text"))
    def text(self, obj: Message) -> str:
        if not self._may_read:
            return "—"
        return obj.content[:500]

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        self._may_read = request.user.has_perm(VIEW_CONTENT)
        return super().get_formset(request, obj, **kwargs)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(ManageAgentMixin, admin.ModelAdmin):
    list_display = ["__str__", "user", "status", "message_count", "cost", "last_message_at"]
    list_filter = ["status"]
    search_fields = ["user__username", "id"]
    readonly_fields = ["id", "user", "title", "status", "message_count", "last_message_at", "created_at"]
    fields = readonly_fields
    actions = ["archive", "delete_softly", "restore"]
    inlines = [MessageInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).select_related("user").annotate(total_cost=Sum("messages__cost_usd"))

    @admin.display(description=_("cost (USD)"), ordering="total_cost")
    def cost(self, obj: Conversation) -> Any:
        return obj.total_cost or 0

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Conversation], status: str) -> None:
        changed = conversations.staff_set_status(queryset.values_list("pk", flat=True), status)
        self.message_user(request, _("%(count)d chats changed.") % {"count": changed})

    @admin.action(description=_("Archive the selected chats"))
    def archive(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._set_status(request, queryset, Conversation.Status.ARCHIVED)

    @admin.action(description=_("Delete the selected chats (soft)"))
    def delete_softly(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._set_status(request, queryset, Conversation.Status.DELETED)

    @admin.action(description=_("Restore the selected chats"))
    def restore(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._set_status(request, queryset, Conversation.Status.ACTIVE)


@admin.register(Turn)
class TurnAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "user", "conversation", "status", "end_reason", "created_at", "ended_at"]
    list_filter = ["status", "end_reason"]
    search_fields = ["id", "user__username"]
    exclude = ["session_key", "text"]
    actions = ["stop"]

    @admin.action(description=_("Stop the selected turns"))
    def stop(self, request: HttpRequest, queryset: QuerySet[Turn]) -> None:
        asked = sum(monitor.request_stop(pk) for pk in queryset.values_list("pk", flat=True))
        self.message_user(request, _("%(count)d turns asked to stop.") % {"count": asked})


@admin.register(Confirmation)
class ConfirmationAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["tool_name", "user", "conversation", "status", "created_at", "decided_at"]
    list_filter = ["status", "tool_name"]
    search_fields = ["user__username", "tool_name"]
    exclude = ["arguments", "preview", "fingerprint"]


@admin.register(AIRequest)
class AIRequestAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["created_at", "user", "task", "model", "status", "error_code", "input_tokens",
                    "output_tokens", "cost_usd", "latency_ms"]
    list_filter = ["status", "source", "task", "error_code"]
    search_fields = ["user__username", "model"]
    exclude = ["captured"]
    date_hierarchy = "created_at"
    change_list_template = "admin/agent/airequest/change_list.html"

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:
            response.context_data["cost_totals"] = (
                changelist.queryset.annotate(day=TruncDate("created_at"))
                .values("day", "user__username")
                .annotate(calls=Count("id"), cost=Sum("cost_usd"), tokens_in=Sum("input_tokens"),
                          tokens_out=Sum("output_tokens"))
                .order_by("-day", "-cost")[:100]
            )
        return response


@admin.register(OffPurposeFlag)
class OffPurposeFlagAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["created_at", "user", "reason", "turn_ref"]
    search_fields = ["user__username", "reason"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)  # lifting a block early is a staff decision


class AttachmentInline(admin.TabularInline):
    """A chat's files: name, type, size, status; their text only for ``agent.view_chat_content``."""

    model = Attachment
    extra = 0
    can_delete = False
    max_num = 0
    fields = ["name", "content_type", "size", "status", "error_code", "is_picture", "message", "created_at", "extracted"]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attachment]:
        rows = super().get_queryset(request).order_by("-created_at")
        return rows if request.user.has_perm(VIEW_CONTENT) else rows.defer("text")

    @admin.display(description=_("text"))
    def extracted(self, obj: Attachment) -> str:
        if not self._may_read:
            return "—"
        return obj.text[:500]

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        self._may_read = request.user.has_perm(VIEW_CONTENT)
        return super().get_formset(request, obj, **kwargs)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


ConversationAdmin.inlines = [*ConversationAdmin.inlines, AttachmentInline]
