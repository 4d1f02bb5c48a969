import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.core.signals import setting_changed
from django.db import models
from django.dispatch import receiver
from django.utils import timezone
from django.utils.functional import LazyObject, empty
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:  # a LazyObject passes for what it wraps, ``isinstance`` too: to the type checker, a storage
    _LazyStorage = Storage
else:
    _LazyStorage = LazyObject


class _AttachmentStorage(_LazyStorage):
    """The storage named by ``AGENT["ATTACHMENT_STORAGE"]`` (an alias of ``settings.STORAGES``).

    Read here, not through ``agent.core.conf``: models sit below the settings layer.
    """

    def _setup(self) -> None:
        self._wrapped: Any = storages[getattr(settings, "AGENT", {}).get("ATTACHMENT_STORAGE", "default")]


attachment_storage = _AttachmentStorage()


@receiver(setting_changed)
def _forget_storage(setting: str, **kwargs: Any) -> None:
    if setting in ("STORAGES", "AGENT", "MEDIA_ROOT"):
        attachment_storage._wrapped = empty


def select_storage() -> Storage:
    return attachment_storage


def stored_name(attachment: "Attachment", filename: str) -> str:
    """Where a file is kept: by user and uuid, never by the name the browser sent."""
    return f"agent/attachments/{attachment.user_id}/{attachment.pk.hex}"


class Attachment(models.Model):
    """A user's file in a chat, waiting in the composer until a turn links it to a message."""

    class Status(models.TextChoices):
        PENDING = "pending", _("processing")
        READY = "ready", _("ready")
        FAILED = "failed", _("failed")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_attachments")
    conversation = models.ForeignKey("agent.Conversation", on_delete=models.CASCADE, related_name="attachments")
    message = models.ForeignKey(
        "agent.Message", null=True, blank=True, on_delete=models.CASCADE, related_name="attachments"
    )
    name = models.CharField(_("name"), max_length=255)
    content_type = models.CharField(_("type"), max_length=100)
    size = models.PositiveBigIntegerField(_("size"))
    file = models.FileField(storage=select_storage, upload_to=stored_name, max_length=255)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING)
    error_code = models.CharField(_("error"), max_length=32, blank=True)
    text = models.TextField(blank=True)
    text_complete = models.BooleanField(default=True)
    is_picture = models.BooleanField(_("picture"), default=False)
    created_at = models.DateTimeField(_("added"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("file")
        verbose_name_plural = _("files")
        indexes = [
            models.Index(
                fields=["conversation", "created_at"],
                condition=models.Q(message__isnull=True),
                name="agent_att_composer",
            ),
            models.Index(fields=["created_at"], condition=models.Q(message__isnull=True), name="agent_att_unlinked"),
        ]

    def __str__(self) -> str:
        # The name is the user's words, as a chat's title is: never in a label staff may see.
        return str(self.id)

    @property
    def stored_as(self) -> str:
        """The file's name in its storage: every row is created with its file, so it always has one."""
        name: str | None = self.file.name
        if not name:
            raise ValueError(f"attachment {self.id} has no stored file")
        return name

    def open_stored(self) -> Any:
        """The stored bytes, opened for reading from whichever storage holds them."""
        return self.file.storage.open(self.stored_as, "rb")
