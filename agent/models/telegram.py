from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class TelegramLink(models.Model):
    """A private Telegram chat linked to a user: a credential like a browser session, live until revoked."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_telegram_links")
    chat_id = models.BigIntegerField(_("Telegram chat"))
    name = models.CharField(_("Telegram name"), max_length=200, blank=True)  # as Telegram gave it when linked
    language = models.CharField(max_length=16, blank=True)  # Telegram's, where the site offers it
    conversation = models.ForeignKey(
        "agent.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )  # the chat its messages go to
    created_at = models.DateTimeField(_("linked"), auto_now_add=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("Telegram link")
        verbose_name_plural = _("Telegram links")
        constraints = [
            models.UniqueConstraint(
                fields=["chat_id"], condition=models.Q(revoked_at__isnull=True), name="agent_tglink_one_live"
            )
        ]

    def __str__(self) -> str:
        # The chat's id is how to reach the person: never in a label.
        return f"{self.name or 'Telegram'} #{self.pk}"


class TelegramLinkToken(models.Model):
    """A one-time link token; only its digest is kept."""

    digest = models.CharField(max_length=64, primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("Telegram link token")
        verbose_name_plural = _("Telegram link tokens")


class TelegramUpdate(models.Model):
    """An update from Telegram, recorded by its id so each is handled once; its body is kept until then."""

    update_id = models.BigIntegerField(primary_key=True)
    payload = models.JSONField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    handled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("Telegram update")
        verbose_name_plural = _("Telegram updates")


class TelegramButtons(models.Model):
    """A bot message with buttons (a card's Confirm / Cancel, a list of chats to switch to).

    A press carries ``<token>:<choice>``: the token is random and says nothing; what it stands for
    stays here.
    """

    class Kind(models.TextChoices):
        CARD = "card", _("card")
        CHATS = "chats", _("chats")

    token = models.CharField(max_length=32, unique=True)
    link = models.ForeignKey(TelegramLink, on_delete=models.CASCADE, related_name="buttons")
    message_id = models.BigIntegerField()  # Telegram's, in the link's chat
    kind = models.CharField(max_length=8, choices=Kind.choices)
    confirmation = models.ForeignKey(
        "agent.Confirmation", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    chats = models.JSONField(default=list, blank=True)  # the chats listed, in order, for a press to pick
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("Telegram buttons")
        verbose_name_plural = _("Telegram buttons")


class TelegramTurn(models.Model):
    """A turn asked for in Telegram: how far its messages reached the chat."""

    turn = models.OneToOneField("agent.Turn", on_delete=models.CASCADE, primary_key=True, related_name="telegram")
    delivered_seq = models.BigIntegerField(default=0)  # the last of its messages sent to Telegram

    class Meta:
        verbose_name = _("Telegram turn")
        verbose_name_plural = _("Telegram turns")


class TelegramDraft(models.Model):
    """The Telegram message an answer streamed into while the model wrote it; the stored answer replaces its text."""

    answer = models.UUIDField(primary_key=True)  # the id the answer is (or would have been) stored under
    turn = models.ForeignKey("agent.Turn", on_delete=models.CASCADE, related_name="+")
    message_id = models.BigIntegerField()

    class Meta:
        verbose_name = _("Telegram draft")
        verbose_name_plural = _("Telegram drafts")


class TelegramBot(models.Model):
    """The site's bot as the reader and the workers last saw it (one row): the health page shows it."""

    offset = models.BigIntegerField(default=0)  # the next update the reader asks for
    last_update_at = models.DateTimeField(null=True, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=100, blank=True)  # the error's kind only, never its text
    errors = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = _("Telegram bot")
        verbose_name_plural = _("Telegram bot")

    @classmethod
    def current(cls) -> "TelegramBot":
        row, _created = cls.objects.get_or_create(pk=1)
        return row
