"""Pictures for the model: image parts in every round of their own turn only.

The history keeps a line that names each picture (``history.user_content``);
the pixels go only with the turn that sent them, as JPEG or PNG data URLs no
larger than ``PICTURE_MAX_PX`` on their longest side.
"""

from __future__ import annotations

import base64
import io
import logging
from typing import Any, Iterable, Sequence

from django.db import transaction
from django.utils.translation import gettext as _

from ..ai import providers
from ..core import events
from ..core.conf import agent_settings
from ..models import Attachment, Endpoint

logger = logging.getLogger(__name__)


def user_parts(text: str, pictures: Sequence[Attachment]) -> str | list[dict[str, Any]]:
    """The user entry's content: ``text`` alone, or a text part followed by one image part per picture.

    A picture whose stored file cannot be read (gone from the storage, or damaged) is a text part
    that says so, and the turn goes on without it.
    """
    if not pictures:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for picture in pictures:
        try:
            parts.append({"type": "image_url", "image_url": {"url": data_url(picture)}})
        except Exception as error:  # a storage's or Pillow's: each backend raises its own
            logger.warning("agent: picture %s could not be read (%s)", picture.pk, type(error).__name__)
            unread = _("[picture: %(name)s could not be read: its file is missing or damaged]")
            parts.append({"type": "text", "text": unread % {"name": picture.name}})
    return parts


def data_url(picture: Attachment) -> str:
    """The stored picture as a data URL, downscaled again if ``PICTURE_MAX_PX`` shrank since it was read."""
    with picture.open_stored() as handle:
        data = handle.read()  # a re-encoded picture, at most PICTURE_MAX_PX square
    content_type = picture.content_type
    side = agent_settings.PICTURE_MAX_PX
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if max(image.size) > side:
            image.thumbnail((side, side))
            png = content_type == "image/png"
            out = io.BytesIO()
            (image if png else image.convert("RGB")).save(out, "PNG" if png else "JPEG", quality=85)
            data, content_type = out.getvalue(), "image/png" if png else "image/jpeg"
    return f"data:{content_type};base64,{base64.b64encode(data).decode('ascii')}"


def with_pictures(messages: list[dict[str, Any]], parts: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history (ending with the turn's user entry) with that entry's content replaced by ``parts``."""
    if isinstance(parts, str):
        return messages
    return [*messages[:-1], {**messages[-1], "content": parts}]


def pictures_of(attachments: Iterable[Attachment]) -> list[Attachment]:
    return [a for a in attachments if a.is_picture]


def sees_pictures(endpoint: Endpoint | None) -> bool:
    """Whether the model is known to take images (its adapter says); one that is not is never sent any."""
    return endpoint is not None and providers.adapter_for(endpoint).sees_pictures()


def unlink(message: Any, *, pictures_only: bool = False) -> list[Attachment]:
    """Take the files (or only the pictures) off a message, back to the chat's composer
    (``pictures_not_seen``); tabs are told. Call it inside the turn's fenced transaction."""
    with transaction.atomic():
        files = Attachment.objects.select_for_update().filter(message=message)
        if pictures_only:
            files = files.filter(is_picture=True)
        rows = list(files.defer("text"))
        Attachment.objects.filter(pk__in=[r.pk for r in rows]).update(message=None)
        for row in rows:
            row.message = None
            events.attachment_processed(row.conversation_id, row.pk)
    return rows
