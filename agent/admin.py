"""Staff pages, for users with ``agent.manage_agent``.

List pages never show a message's text, a tool's arguments or results, a
session key or an API key; message text needs ``agent.view_chat_content``.
"""

from __future__ import annotations

import csv
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Iterator

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.filters import FieldListFilter, ListFilter
from django.contrib.admin.utils import get_fields_from_path
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Aggregate, Count, F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from . import conversations
from .ai import AIError, complete, limits
from .ai import endpoints as endpoint_rules
from .conf import agent_settings
from .models import (
    AgentSettings,
    AIRequest,
    Attachment,
    Confirmation,
    Conversation,
    Endpoint,
    Message,
    OffPurposeFlag,
    Turn,
    UserSettings,
)
from .turns import monitor

MANAGE = "agent.manage_agent"
MANAGE_ENDPOINTS = "agent.manage_endpoints"
VIEW_CONTENT = "agent.view_chat_content"
SITE_ENDPOINT_FIELDS = ["default_endpoint", "picture_endpoint", "selectable_endpoints"]
USER_ENDPOINT_FIELDS = ["endpoint", "picture_endpoint"]


class DeclaredLookupsOnly:
    """A list page filters only as its own filters and date links do; any other lookup in the
    query string is refused (400), so no field can be probed through the row count.

    Django's own check guards relations only: ``?session_key__regex=^a`` would be run.
    """

    def lookup_allowed(self, lookup: str, value: Any, request: Any = None) -> bool:
        return lookup in self.declared_lookups(request)

    def declared_lookups(self, request: Any) -> set[str]:
        """The query-string keys of this page's ``list_filter`` and ``date_hierarchy``."""
        allowed: set[str] = set()
        for entry in self.get_list_filter(request):  # type: ignore[attr-defined]
            allowed.update(self._filter_parameters(request, entry))
        hierarchy = self.date_hierarchy  # type: ignore[attr-defined]
        if hierarchy:
            allowed.update(f"{hierarchy}__{part}" for part in ("year", "month", "day"))
        return allowed

    def _filter_parameters(self, request: Any, entry: Any) -> list[str]:
        model = self.model  # type: ignore[attr-defined]
        if isinstance(entry, type) and issubclass(entry, ListFilter) and not issubclass(entry, FieldListFilter):
            return list(entry(request, {}, model, self).expected_parameters())
        field_path, filter_class = entry if isinstance(entry, (tuple, list)) else (entry, FieldListFilter.create)
        field = get_fields_from_path(model, field_path)[-1]
        spec = filter_class(field, request, {}, model, self, field_path=field_path)
        return list(spec.expected_parameters())


class ManageAgentMixin(DeclaredLookupsOnly):
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


def may_manage_endpoints(request: HttpRequest) -> bool:
    return request.user.has_perm(MANAGE) and request.user.has_perm(MANAGE_ENDPOINTS)


def may_read_content(request: HttpRequest) -> bool:
    return request.user.has_perm(VIEW_CONTENT)


class EndpointForm(forms.ModelForm):
    """An endpoint's key never moves with it by accident: a new base URL drops the stored key unless
    this form gives a new one, and sending a variable's key to a new URL takes a tick."""

    base_url = forms.URLField(label=_("base URL"), max_length=500, assume_scheme="https")
    api_key = forms.CharField(
        label=_("API key"),
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=_("Write-only: leave empty to keep the current key. A new base URL removes it unless one is given."),
    )
    clear_api_key = forms.BooleanField(label=_("Remove the stored key"), required=False)
    send_key_to_new_url = forms.BooleanField(label=_("Send the key in the variable to the new URL"), required=False)

    class Meta:
        model = Endpoint
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_change = ""
        if "api_key_env" in self.fields:  # not on the read-only page
            self.fields["api_key_env"].help_text = _("Name of an environment variable holding the key: %(prefix)s…") % {
                "prefix": agent_settings.API_KEY_ENV_PREFIX
            }
        if self.instance.api_key_env:
            self.fields["send_key_to_new_url"].label = _("Send the key in $%(name)s to the new URL") % {
                "name": self.instance.api_key_env
            }

    def clean_api_key_env(self) -> str:
        name = self.cleaned_data["api_key_env"].strip()
        if name and not endpoint_rules.key_env_allowed(name):
            raise forms.ValidationError(
                _("Only a variable whose name starts with %(prefix)s may hold a key."),
                code="key_env_not_allowed",
                params={"prefix": agent_settings.API_KEY_ENV_PREFIX},
            )
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        stored = self.instance.api_key if self.instance.pk else ""
        supplied = data.get("api_key") or ""
        url = data.get("base_url")
        moved = bool(self.instance.pk) and url is not None and url != self.instance.base_url
        if supplied:
            data["api_key"], self.key_change = supplied, "replaced" if stored else "added"
        elif stored and (data.get("clear_api_key") or moved):
            data["api_key"], self.key_change = "", "removed"
        else:
            data["api_key"] = stored
        variable = data.get("api_key_env")
        if moved and variable and not supplied and not data.get("send_key_to_new_url"):
            self.add_error(
                "send_key_to_new_url",
                _("The key in $%(name)s would go to %(url)s: tick this to send it there, or clear the variable.")
                % {"name": variable, "url": url},
            )
        return data

    def change_summary(self) -> str:
        """What this save changed, for the admin's history: a new base URL and variable name with
        their old ones, and what happened to the stored key (never a key)."""
        parts = []
        for name in self.changed_data:
            if name in ("api_key", "clear_api_key", "send_key_to_new_url"):
                continue
            if name in ("base_url", "api_key_env"):
                old, new = self.initial.get(name) or "—", self.cleaned_data.get(name) or "—"
                parts.append(f"{self.fields[name].label}: {old} → {new}")
            else:
                parts.append(str(self.fields[name].label))
        key_changes = {
            "added": _("API key stored"),
            "replaced": _("API key replaced"),
            "removed": _("stored API key removed"),
        }
        if self.key_change:
            parts.append(str(key_changes[self.key_change]))
        if not parts:
            return str(_("No fields changed."))
        return str(_("Changed %(changes)s.") % {"changes": "; ".join(parts)})


@admin.register(Endpoint)
class EndpointAdmin(ManageAgentMixin, admin.ModelAdmin):
    """Adding, changing and deleting endpoints takes ``agent.manage_endpoints`` too: an endpoint
    decides where users' chats and the site's keys go. Without it the page is read-only."""

    form = EndpointForm
    list_display = [
        "name",
        "model",
        "base_url",
        "key",
        "enabled",
        "supports_tools",
        "supports_images",
        "supports_streaming",
    ]
    list_filter = ["enabled"]
    search_fields = ["name", "model"]
    actions = ["test_call"]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return may_manage_endpoints(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_manage_endpoints(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_manage_endpoints(request)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_fields(request, obj))
        if self.has_change_permission(request, obj):
            return fields
        # read-only shows each field's stored value: the key only masked, the form's ticks not at all
        fields = [name for name in fields if name not in ("clear_api_key", "send_key_to_new_url")]
        return ["key" if name == "api_key" else name for name in fields]

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        if add:
            return super().construct_change_message(request, form, formsets, add)
        return form.change_summary()

    @admin.display(description=_("API key"))
    def key(self, obj: Endpoint) -> str:
        if obj.api_key:
            return "••••" + obj.api_key[-4:] if len(obj.api_key) > 12 else "••••"
        return f"${obj.api_key_env}" if obj.api_key_env else "—"

    @admin.action(description=_("Make a test call"))
    def test_call(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        """Call each endpoint as a turn does (streamed where it streams); a server that refuses to
        stream but answers whole is named, so staff know to untick "supports streaming"."""
        for endpoint in queryset:
            try:
                answer = self._call(endpoint, request, streamed=True)
            except AIError as error:
                if (
                    endpoint.supports_streaming
                    and error.status in (400, 422)
                    and self._answers_whole(endpoint, request)
                ):
                    text = _(
                        "%(name)s: refused to stream (%(status)s), but answers whole: untick “supports streaming”."
                    )
                    self.message_user(request, text % {"name": endpoint, "status": error.status}, messages.WARNING)
                    continue
                self.message_user(
                    request, _("%(name)s: failed (%(code)s)") % {"name": endpoint, "code": error.code}, messages.ERROR
                )
            else:
                self.message_user(
                    request,
                    _("%(name)s: answered in %(ms)d ms") % {"name": endpoint, "ms": answer.latency_ms},
                    messages.SUCCESS,
                )

    def _answers_whole(self, endpoint: Endpoint, request: HttpRequest) -> bool:
        try:
            self._call(endpoint, request, streamed=False)
        except AIError:
            return False
        return True

    @staticmethod
    def _call(endpoint: Endpoint, request: HttpRequest, *, streamed: bool) -> Any:
        return complete(
            endpoint,
            [{"role": "user", "content": "Reply with: ok"}],
            user=request.user,
            source="admin",
            task="agent.endpoint_test",
            on_chunk=(lambda text: None) if streamed else None,
        )


@admin.register(AgentSettings)
class AgentSettingsAdmin(ManageAgentMixin, admin.ModelAdmin):
    filter_horizontal = ["selectable_endpoints"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """Which endpoints the site uses is for ``agent.manage_endpoints`` holders to change."""
        if may_manage_endpoints(request):
            return self.readonly_fields
        return [*self.readonly_fields, *SITE_ENDPOINT_FIELDS]

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
    """A user's own instructions are theirs: never editable here, shown to content readers only."""

    list_display = ["user", "enabled", "language", "endpoint_in_effect", "daily_cost_cap", "daily_turns_cap"]
    exclude = ["instructions"]
    readonly_fields = ["endpoint_in_effect", "picture_endpoint_in_effect", "limits_now"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """A personal endpoint is for ``agent.manage_endpoints`` holders to set."""
        instructions = "own_instructions" if may_read_content(request) else "own_instructions_hidden"
        endpoints = [] if may_manage_endpoints(request) else USER_ENDPOINT_FIELDS
        return [*endpoints, instructions, *self.readonly_fields]

    @admin.display(description=_("own instructions"))
    def own_instructions(self, obj: UserSettings) -> str:
        return obj.instructions or "—"

    @admin.display(description=_("own instructions"))
    def own_instructions_hidden(self, obj: UserSettings) -> str:
        return "—"

    @admin.display(description=_("endpoint in effect"))
    def endpoint_in_effect(self, obj: UserSettings) -> str:
        return choice_label(endpoint_rules.effective(obj.user, user_settings=obj))

    @admin.display(description=_("picture endpoint in effect"))
    def picture_endpoint_in_effect(self, obj: UserSettings) -> str:
        return choice_label(endpoint_rules.effective(obj.user, pictures=True, user_settings=obj))

    @admin.display(description=_("limits now"))
    def limits_now(self, obj: UserSettings) -> str:
        """The user's standing against each cap, as the user is told it."""
        if obj.pk is None:
            return "—"
        lines = []
        for standing in limits.usage(obj.user).values():
            params = standing.params()
            text = limits.message(params) if standing.reached else None
            lines.append(text or _("%(limit)s: %(used)s of %(cap)s (0: no cap)") % params)
        return " · ".join(str(line) for line in lines)

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


class ContentInline(admin.TabularInline):
    """A read-only inline for staff with manage_agent; its text shows only to view_chat_content holders."""

    _may_read = False

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        self._may_read = request.user.has_perm(VIEW_CONTENT)
        return super().get_formset(request, obj, **kwargs)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MessageInline(ContentInline):
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


@admin.register(Conversation)
class ConversationAdmin(ManageAgentMixin, admin.ModelAdmin):
    """A chat's title is the user's words (by default the start of their first message): it shows
    to ``agent.view_chat_content`` holders only, everyone else sees the chat's id."""

    list_display = ["chat", "user", "status", "message_count", "cost", "last_message_at"]
    list_filter = ["status"]
    search_fields = ["user__username", "id"]
    readonly_fields = ["id", "user", "title_hidden", "status", "message_count", "last_message_at", "created_at"]
    fields = readonly_fields
    actions = ["archive", "delete_softly", "restore"]
    inlines = [MessageInline]

    def get_list_display(self, request: HttpRequest) -> Any:
        return ["chat_titled" if may_read_content(request) else "chat", *self.list_display[1:]]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.get_readonly_fields(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        title = "title" if may_read_content(request) else "title_hidden"
        return [title if name == "title_hidden" else name for name in self.readonly_fields]

    @admin.display(description=_("chat"))
    def chat(self, obj: Conversation) -> str:
        return str(obj.pk)

    @admin.display(description=_("chat"))
    def chat_titled(self, obj: Conversation) -> str:
        return obj.title or str(obj.pk)

    @admin.display(description=_("title"))
    def title_hidden(self, obj: Conversation) -> str:
        return "—"

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
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:
            response.context_data["cost_totals"] = (
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


@admin.register(OffPurposeFlag)
class OffPurposeFlagAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """A flag's reason quotes what the user asked: shown and searched for content readers only."""

    list_display = ["created_at", "user", "reason_hidden", "turn_ref"]
    search_fields = ["user__username"]
    exclude = ["reason"]
    readonly_fields = ["reason_hidden"]

    def get_list_display(self, request: HttpRequest) -> Any:
        return [self._reason(request) if name == "reason_hidden" else name for name in self.list_display]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [self._reason(request)]

    def get_search_fields(self, request: HttpRequest) -> Any:
        return [*self.search_fields, "reason"] if may_read_content(request) else self.search_fields

    @staticmethod
    def _reason(request: HttpRequest) -> str:
        return "shown_reason" if may_read_content(request) else "reason_hidden"

    @admin.display(description=_("reason"))
    def shown_reason(self, obj: OffPurposeFlag) -> str:
        return obj.reason

    @admin.display(description=_("reason"))
    def reason_hidden(self, obj: OffPurposeFlag) -> str:
        return "—"

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)  # lifting a block early is a staff decision


class AttachmentInline(ContentInline):
    """A chat's files: type, size, status; their names and text only for ``agent.view_chat_content``
    (a file's name is the user's words as much as its text is)."""

    model = Attachment
    extra = 0
    can_delete = False
    max_num = 0
    fields = [
        "file_name",
        "content_type",
        "size",
        "status",
        "error_code",
        "is_picture",
        "message",
        "created_at",
        "extracted",
    ]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attachment]:
        rows = super().get_queryset(request).order_by("-created_at")
        return rows if request.user.has_perm(VIEW_CONTENT) else rows.defer("text")

    @admin.display(description=_("name"))
    def file_name(self, obj: Attachment) -> str:
        return obj.name if self._may_read else "—"

    @admin.display(description=_("text"))
    def extracted(self, obj: Attachment) -> str:
        if not self._may_read:
            return "—"
        return obj.text[:500]


ConversationAdmin.inlines = [*ConversationAdmin.inlines, AttachmentInline]


def choice_label(choice: endpoint_rules.Choice) -> str:
    """An endpoint in effect, marked personal, inherited (the site's) or fallback with its reason."""
    name = str(choice.endpoint) if choice.endpoint is not None else "—"
    if choice.source == endpoint_rules.PERSONAL:
        return _("%(name)s (personal)") % {"name": name}
    if choice.source == endpoint_rules.FALLBACK:
        return _("%(name)s (fallback: %(reason)s)") % {"name": name, "reason": choice.reason}
    return _("%(name)s (inherited)") % {"name": name}


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
    cost = {(r["day"], r["user__username"] or "—"): float(r["amount"] or 0) for r in cost_rows}
    turns = {(r["day"], r["user__username"] or "—"): float(r["amount"]) for r in turn_rows}
    days = [first + timedelta(days=n) for n in range(CHART_DAYS)]
    table = sorted({key for key in [*cost, *turns]}, key=lambda key: (key[0], key[1]), reverse=True)
    return {
        "cost_chart": _stacked_bars(days, cost, money=True),
        "turns_chart": _stacked_bars(days, turns, money=False),
        "rows": [
            {"day": d, "user": u, "cost": cost.get((d, u), 0), "turns": int(turns.get((d, u), 0))} for d, u in table
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
        bottom = CHART_HEIGHT - CHART_BOTTOM
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
    for row in failed.annotate(count=Count("id")).order_by("-count"):
        entry = health[row["endpoint_id"]]
        code = row["error_code"] + (f" ({row['http_status']})" if row["http_status"] else "")
        entry["errors"].append(
            {"code": code, "count": row["count"], "rate": round(100 * row["count"] / entry["calls"], 1)}
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
