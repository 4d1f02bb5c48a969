import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def alive(self) -> "ConversationQuerySet":
        return self.exclude(status=Conversation.Status.DELETED)


class Conversation(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", _("active")
        ARCHIVED = "archived", _("archived")
        DELETED = "deleted", _("deleted")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_conversations")
    # no width of its own: AGENT["MAX_TITLE_CHARS"] is the one limit, kept by the doors that set a title
    title = models.TextField(_("title"), blank=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.ACTIVE)
    message_count = models.PositiveIntegerField(_("messages"), default=0)
    last_message_at = models.DateTimeField(_("last message"), default=timezone.now)
    line_end = models.UUIDField(null=True, blank=True, editable=False)  # the last message of the active line
    has_versions = models.BooleanField(default=False, editable=False)  # a message was ever edited or regenerated
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-last_message_at", "-id"]
        verbose_name = _("chat")
        verbose_name_plural = _("chats")
        indexes = [
            models.Index(fields=["user", "status", "-last_message_at", "-id"], name="agent_conv_list"),
            models.Index(fields=["status", "last_message_at"], name="agent_conv_retention"),
        ]

    def __str__(self) -> str:
        # The title is the user's words (by default their first message): never in a label.
        return str(self.id)


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", _("user")
        ASSISTANT = "assistant", _("assistant")
        TOOL = "tool", _("tool")
        NOTICE = "notice", _("notice")

    class ToolOutcome(models.TextChoices):
        OK = "ok", _("ok")
        ERROR = "error", _("error")
        DENIED = "denied", _("denied")
        INVALID_ARGUMENTS = "invalid_arguments", _("invalid arguments")
        NEEDS_CONFIRMATION = "needs_confirmation", _("needs confirmation")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    seq = models.BigIntegerField(editable=False)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True)
    tool_name = models.CharField(max_length=64, blank=True)
    tool_outcome = models.CharField(max_length=32, choices=ToolOutcome.choices, blank=True)
    tool_result = models.JSONField(null=True, blank=True)
    tool_result_truncated = models.BooleanField(default=False)
    notice_code = models.CharField(max_length=64, blank=True)
    notice_params = models.JSONField(default=dict, blank=True)
    confirmation = models.ForeignKey(
        "agent.Confirmation", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    assistant_message = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_messages"
    )
    turn = models.ForeignKey("agent.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    ai_request = models.ForeignKey(
        "agent.AIRequest", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    partial = models.BooleanField(
        _("partial"), default=False, help_text=_("An answer cut short by a stop or the deadline: what the user saw.")
    )
    # Versions: the messages form a tree. ``parent`` is the message before this one on its line;
    # the children of one parent are versions of each other; the active line is one root-to-leaf
    # path, kept in ``active``; ``last_child`` remembers which child was on the line when this
    # message left it, so a switch brings back the same line. Rows go only with their chat, so
    # neither link is a database constraint.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    last_child = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    active = models.BooleanField(default=True)
    spoken = models.BooleanField(
        _("spoken"), default=False, help_text=_("The user's words, transcribed from a voice note.")
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation", "seq"]
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="agent_message_seq"),
            models.UniqueConstraint(
                fields=["conversation", "parent"],
                condition=models.Q(active=True),
                name="agent_message_one_line",
            ),
            models.CheckConstraint(
                condition=~models.Q(role="notice") | ~models.Q(notice_code=""), name="agent_notice_has_code"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "seq"], condition=models.Q(active=True), name="agent_msg_line"),
            models.Index(fields=["conversation", "parent", "seq"], name="agent_msg_versions"),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.seq}"
