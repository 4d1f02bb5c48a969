import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Confirmation(models.Model):
    """A card: a write the model proposed, held until its user decides."""

    class Status(models.TextChoices):
        WAITING = "waiting", _("waiting")
        DONE = "done", _("done")
        CANCELLED = "cancelled", _("cancelled")
        EXPIRED = "expired", _("expired")
        STALE = "stale", _("the data changed")
        FAILED = "failed", _("failed")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_confirmations")
    conversation = models.ForeignKey("agent.Conversation", on_delete=models.CASCADE, related_name="confirmations")
    turn = models.ForeignKey("agent.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    tool_name = models.CharField(max_length=64)
    call_id = models.CharField(max_length=128)
    arguments = models.JSONField(default=dict)
    preview = models.JSONField(default=dict)
    edits = models.JSONField(null=True, blank=True)  # what the user changed on the card; server only, as arguments
    fingerprint = models.CharField(max_length=128)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.WAITING)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=200, blank=True)
    result = models.TextField(blank=True)  # what a done write returned, as the model is told it; server only
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("confirmation card")
        verbose_name_plural = _("confirmation cards")
        indexes = [models.Index(fields=["conversation", "status"], name="agent_card_chat_status")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"
