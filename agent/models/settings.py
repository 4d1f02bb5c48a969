from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

UNREAD: Any = object()
"""What a caller that has not read the user's settings row passes for it (the default): the callee reads it."""


class AgentSettings(models.Model):
    """The site's one settings row (``AgentSettings.current()``)."""

    enabled = models.BooleanField(_("assistant enabled"), default=True)
    default_endpoint = models.ForeignKey(
        "agent.Endpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    picture_endpoint = models.ForeignKey(
        "agent.Endpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    selectable_endpoints = models.ManyToManyField(
        "agent.Endpoint", blank=True, related_name="+", help_text=_("Endpoints users may pick for themselves.")
    )
    speech_endpoint = models.ForeignKey(
        "agent.Endpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("Turns users' voice into text; without one, the microphone is not offered."),
    )
    system_prompt = models.TextField(_("site instructions"), blank=True)
    daily_cost_per_user = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text=_("USD per user per 24 hours; empty uses the setting, 0 means no cap."),
    )
    daily_turns_per_user = models.PositiveIntegerField(
        null=True, blank=True, help_text=_("Turns per user per 24 hours; empty uses the setting, 0 means no cap.")
    )
    daily_cost_site = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text=_("USD for the whole site per 24 hours; empty uses the setting, 0 means no cap."),
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("assistant settings")
        verbose_name_plural = _("assistant settings")
        permissions = [
            ("use_agent", _("Can use the assistant")),
            ("use_telegram", _("Can use the assistant in Telegram")),
            ("use_mcp", _("Can use the assistant's tools from MCP clients")),
            ("manage_agent", _("Can manage the assistant")),
            ("view_chat_content", _("Can read the text of assistant chats")),
            ("manage_endpoints", _("Can change the assistant's endpoints and which ones are used")),
        ]

    def __str__(self) -> str:
        return str(_("Assistant settings"))

    @classmethod
    def current(cls) -> "AgentSettings":
        """The one settings row, created with defaults on first use, with its endpoints in the same read."""
        related = cls.objects.select_related("default_endpoint", "picture_endpoint", "speech_endpoint")
        row, _created = related.get_or_create(pk=1)
        return row


def language_choices() -> list[tuple[str, str]]:
    """The site's ``LANGUAGES``, read when asked.

    The field's migration state names this function, never the host's list, so a
    host's ``makemigrations`` finds nothing to write into the installed app.
    """
    return list(settings.LANGUAGES)


class UserSettings(models.Model):
    class SetBy(models.TextChoices):
        """Who chose a personal endpoint: staff may choose any, a user only from the allow-list.

        It stays when the endpoint is deleted, so the turn can tell "gone" from "never set".
        """

        NOBODY = "", _("nobody")
        STAFF = "staff", _("staff")
        USER = "user", _("the user")

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_settings")
    enabled = models.BooleanField(_("assistant enabled"), null=True, blank=True, help_text=_("Empty means on."))
    endpoint = models.ForeignKey("agent.Endpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    endpoint_set_by = models.CharField(max_length=8, choices=SetBy.choices, blank=True, editable=False)
    picture_endpoint = models.ForeignKey(
        "agent.Endpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    picture_endpoint_set_by = models.CharField(max_length=8, choices=SetBy.choices, blank=True, editable=False)
    speech_endpoint = models.ForeignKey(
        "agent.Endpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    speech_endpoint_set_by = models.CharField(max_length=8, choices=SetBy.choices, blank=True, editable=False)
    instructions = models.TextField(_("own instructions"), blank=True)  # AGENT["MAX_INSTRUCTIONS_CHARS"] limits it
    language = models.CharField(_("language"), max_length=16, blank=True, choices=language_choices)
    daily_cost_cap = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    daily_turns_cap = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user"]
        verbose_name = _("user settings")
        verbose_name_plural = _("user settings")

    def __str__(self) -> str:
        return str(self.user)
