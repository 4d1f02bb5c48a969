import uuid
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Endpoint(models.Model):
    """An OpenAI-compatible model endpoint, managed by staff."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    base_url = models.URLField(_("base URL"), max_length=500, help_text=_("For example https://api.openai.com/v1"))
    api_key = models.CharField(_("API key"), max_length=500, blank=True)
    api_key_env = models.CharField(
        _("API key variable"),
        max_length=100,
        blank=True,
        help_text=_("Name of an environment variable holding the key; the site allows only names with its prefix."),
    )
    model = models.CharField(_("model"), max_length=200)
    supports_images = models.BooleanField(default=False)
    supports_tools = models.BooleanField(default=True)
    supports_transcription = models.BooleanField(
        _("supports transcription"),
        default=False,
        help_text=_("Turns speech into text at /audio/transcriptions (a speech model, such as whisper-1)."),
    )
    supports_streaming = models.BooleanField(
        _("supports streaming"),
        default=True,
        help_text=_("Show answers while the model writes them. Turn off for a server that cannot stream."),
    )
    adapter = models.CharField(
        _("adapter"),
        max_length=200,
        blank=True,
        help_text=_("Dotted path of the provider adapter class; empty: the site's default."),
    )
    input_price_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    output_price_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    audio_price_per_minute = models.DecimalField(
        max_digits=12, decimal_places=6, default=Decimal(0), help_text=_("USD per minute of speech transcribed.")
    )
    timeout_s = models.PositiveIntegerField(default=60)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("endpoint")
        verbose_name_plural = _("endpoints")

    def __str__(self) -> str:
        return self.name


class AIRequest(models.Model):
    """One model call, success or not: the journal of what was spent."""

    class Status(models.TextChoices):
        SUCCESS = "success", _("success")
        ERROR = "error", _("error")
        REFUSED = "refused", _("refused")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="requests")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent_ai_requests"
    )
    source = models.CharField(max_length=50)
    task = models.CharField(max_length=100)
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal(0))
    latency_ms = models.PositiveIntegerField(default=0)
    audio_seconds = models.PositiveIntegerField(default=0)  # of a transcription: the speech's length
    tools_offered = models.PositiveIntegerField(default=0)  # tool definitions the call carried
    tools_bytes = models.PositiveIntegerField(default=0)  # their size as JSON
    status = models.CharField(max_length=16, choices=Status.choices)
    error_code = models.CharField(max_length=50, blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    admission = models.CharField(max_length=64, blank=True)
    attribution = models.JSONField(default=dict, blank=True)
    captured = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("model call")
        verbose_name_plural = _("model calls")
        indexes = [models.Index(fields=["user", "created_at"], name="agent_aireq_user_time")]

    def __str__(self) -> str:
        return f"{self.task} {self.status}"


class OffPurposeFlag(models.Model):
    """The model said a turn was not what this assistant is for (one per turn)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_flags")
    turn_ref = models.UUIDField(unique=True)
    reason = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("off-purpose flag")
        verbose_name_plural = _("off-purpose flags")
        indexes = [models.Index(fields=["user", "created_at"], name="agent_flag_user_time")]

    def __str__(self) -> str:
        # The reason quotes what the user asked: never in a label.
        return str(self.turn_ref)
