from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class QuotaUse(models.Model):
    """One thing a per-minute quota counts (an upload, a transcription, a Telegram link try), kept
    for the minute it counts in whatever became of what it made: a file removed at once still counts."""

    class Kind(models.TextChoices):
        UPLOAD = "upload", _("upload")
        TRANSCRIPTION = "transcription", _("transcription")
        TELEGRAM_LINK = "telegram_link", _("Telegram link try")
        MCP_REGISTRATION = "mcp_registration", _("MCP client registration")

    kind = models.CharField(max_length=16, choices=Kind.choices)
    key = models.CharField(max_length=64)  # whose: a user's id, a Telegram chat's, an IP address's
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("quota use")
        verbose_name_plural = _("quota uses")
        indexes = [models.Index(fields=["kind", "key", "created_at"], name="agent_quotause_who_when")]

    def __str__(self) -> str:
        return f"{self.kind} {self.created_at:%Y-%m-%d %H:%M:%S}"
