"""Staff pages for chats, turns, cards and off-purpose flags: read-only, their users' words hidden
from all but ``agent.view_chat_content`` holders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet, Sum
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from .. import conversations
from ..models import Attachment, Confirmation, Conversation, Message, OffPurposeFlag, Turn
from ..turns import monitor
from .permissions import MANAGE, VIEW_CONTENT, ManageAgentMixin, ReadOnlyMixin, may_read_content

if TYPE_CHECKING:  # Django's admin classes are generic in its stubs only
    _ContentInlineBase = admin.TabularInline[Any, Conversation]  # a chat's rows, of the subclass's model
    _ConversationBase = admin.ModelAdmin[Conversation]
    _TurnBase = admin.ModelAdmin[Turn]
    _ConfirmationBase = admin.ModelAdmin[Confirmation]
    _OffPurposeFlagBase = admin.ModelAdmin[OffPurposeFlag]
else:
    _ContentInlineBase = admin.TabularInline
    _ConversationBase = _TurnBase = _ConfirmationBase = _OffPurposeFlagBase = admin.ModelAdmin


class ContentInline(_ContentInlineBase):
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
    readonly_fields = (
        "seq",
        "role",
        "text",
        "tool_name",
        "tool_outcome",
        "notice_code",
        "model",
        "cost_usd",
        "created_at",
    )
    fields = readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).defer("tool_result", "tool_calls")

    @admin.display(description=_("text"))
    def text(self, obj: Message) -> str:
        if not self._may_read:
            return "—"
        return obj.content[:500]


class AttachmentInline(ContentInline):
    """A chat's files: type, size, status; their names and text only for ``agent.view_chat_content``
    (a file's name is the user's words as much as its text is)."""

    model = Attachment
    extra = 0
    can_delete = False
    max_num = 0
    readonly_fields = (
        "file_name",
        "content_type",
        "size",
        "status",
        "error_code",
        "is_picture",
        "message",
        "created_at",
        "extracted",
    )
    fields = readonly_fields

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


@admin.register(Conversation)
class ConversationAdmin(ManageAgentMixin, _ConversationBase):
    """A chat's title is the user's words (by default the start of their first message): it shows
    to ``agent.view_chat_content`` holders only, everyone else sees the chat's id."""

    list_display = ["chat", "user", "status", "message_count", "cost", "last_message_at"]
    list_filter = ["status"]
    search_fields = ["user__username", "id"]
    readonly_fields = ("id", "user", "title_hidden", "status", "message_count", "last_message_at", "created_at")
    fields = readonly_fields
    actions = ["archive", "delete_softly", "restore"]
    inlines = [MessageInline, AttachmentInline]

    def get_list_display(self, request: HttpRequest) -> Any:
        return ["chat_titled" if may_read_content(request) else "chat", *self.list_display[1:]]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.get_readonly_fields(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        title = "title" if may_read_content(request) else "title_hidden"
        return [title if name == "title_hidden" else name for name in super().get_readonly_fields(request, obj)]

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
        rows: QuerySet[Conversation] = super().get_queryset(request)
        return rows.select_related("user").annotate(total_cost=Sum("messages__cost_usd"))

    @admin.display(description=_("cost (USD)"), ordering="total_cost")
    def cost(self, obj: Conversation) -> Any:
        return getattr(obj, "total_cost", None) or 0  # annotated by get_queryset

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
class TurnAdmin(ReadOnlyMixin, _TurnBase):
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
class ConfirmationAdmin(ReadOnlyMixin, _ConfirmationBase):
    list_display = ["tool_name", "user", "conversation", "status", "created_at", "decided_at"]
    list_filter = ["status", "tool_name"]
    search_fields = ["user__username", "tool_name"]
    exclude = ["arguments", "preview", "fingerprint"]


@admin.register(OffPurposeFlag)
class OffPurposeFlagAdmin(ReadOnlyMixin, _OffPurposeFlagBase):
    """A flag's reason quotes what the user asked: shown and searched for content readers only."""

    list_display = ["created_at", "user", "reason_hidden", "turn_ref"]
    search_fields = ["user__username"]
    exclude = ["reason"]
    readonly_fields = ["reason_hidden"]

    def get_list_display(self, request: HttpRequest) -> Any:
        return [self._reason(request) if name == "reason_hidden" else name for name in self.list_display]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        reason = self._reason(request)
        return [reason if name == "reason_hidden" else name for name in super().get_readonly_fields(request, obj)]

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
