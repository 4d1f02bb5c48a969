import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .fields import SealedCharField


class Turn(models.Model):
    """One run of the assistant in a chat; its id is the turn's ref."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        FINISHED = "finished", _("finished")
        STOPPED = "stopped", _("stopped")
        DEADLINE = "deadline", _("deadline")
        INTERRUPTED = "interrupted", _("interrupted")
        FAILED = "failed", _("failed")

    LIVE = (Status.QUEUED, Status.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey("agent.Conversation", on_delete=models.CASCADE, related_name="turns")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_turns")
    language = models.CharField(max_length=16)
    endpoint = models.ForeignKey("agent.Endpoint", null=True, on_delete=models.SET_NULL, related_name="+")
    endpoint_source = models.CharField(max_length=16, blank=True)  # personal, default or fallback (agent.ai.endpoints)
    endpoint_reason = models.CharField(max_length=16, blank=True)  # why a fallback: disabled, not_allowed, gone
    text = models.TextField()
    attachment_ids = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    end_reason = models.CharField(max_length=32, blank=True)
    # The live session the runner re-checks at every step, kept encrypted and emptied when the turn ends.
    session_key = SealedCharField(max_length=255, blank=True, editable=False, purpose="turn-session-key")
    # Or the linked Telegram chat it runs for, re-checked the same way (``agent.access``).
    telegram_link = models.ForeignKey(
        "agent.TelegramLink", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    spoken = models.BooleanField(default=False)  # its text came from a voice note, transcribed
    user_slot = models.CharField(max_length=100, blank=True, editable=False)
    admission = models.CharField(max_length=64, blank=True)
    user_message = models.ForeignKey(
        "agent.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    deadline_at = models.DateTimeField()
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("turn")
        verbose_name_plural = _("turns")
        indexes = [
            models.Index(fields=["status", "created_at"], name="agent_turn_status"),
            models.Index(fields=["user", "created_at"], name="agent_turn_user_time"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.status}"


class Lock(models.Model):
    """A lease: held by one turn until ``expires_at``, renewed by its heartbeat."""

    name = models.CharField(max_length=200, primary_key=True)
    holder = models.UUIDField(db_index=True)
    fence = models.BigIntegerField(default=1)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]
        verbose_name = _("lock")
        verbose_name_plural = _("locks")

    def __str__(self) -> str:
        return self.name
