"""Per-user quotas on what a user can pile up or send: the bytes of their stored files, new chats a
minute, uploads a minute and recordings transcribed a minute; the link tries of a Telegram chat; and
the OAuth clients registered from one IP address.

Counted from the database, so every host sees the same numbers: the chats made in the last
minute, the uploads and transcriptions sent in it (a ``QuotaUse`` each, so a file removed at once
still counts), and the sizes of every file the user has stored (files of deleted chats count
until they are purged). Each cap is checked in one place, inside the transaction that writes the
row, after ``hold`` has locked the user's row: a user's creates take turns, so two at once cannot
both take the last slot. A cap of 0 is no cap.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections, router, transaction
from django.db.models import QuerySet, Sum
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, ngettext

from ..core.conf import agent_settings
from ..core.errors import Refusal, StorageFull, TooManyChats, TooManyTranscriptions, TooManyUploads
from ..models import Attachment, Conversation, QuotaUse
from .standing import Standing

STORED_BYTES, NEW_CHATS, UPLOADS = "stored_bytes", "new_chats_per_minute", "uploads_per_minute"
TRANSCRIPTIONS = "transcriptions_per_minute"
WINDOW = timedelta(minutes=1)


def hold(user_id: Any) -> None:
    """Lock the user's row until the transaction ends, so the user's quota checks take turns.

    ``FOR NO KEY UPDATE`` where the database has it: rows that point at the user can still be
    written meanwhile.
    """
    users = get_user_model()
    db = router.db_for_write(users)
    no_key = connections[db].features.has_select_for_no_key_update
    list(users._default_manager.using(db).select_for_update(no_key=no_key).filter(pk=user_id).values_list("pk"))


def check_new_chat(user_id: Any) -> None:
    """``TooManyChats`` when the user started ``NEW_CHATS_PER_MINUTE`` chats in the last minute."""
    quota = _rate(NEW_CHATS, agent_settings.NEW_CHATS_PER_MINUTE, Conversation.objects.filter(user_id=user_id))
    if quota.reached:
        raise _refusal(TooManyChats, quota)


def check_upload(user_id: Any, size: int) -> None:
    """``TooManyUploads`` past ``UPLOADS_PER_MINUTE``; ``StorageFull`` when a file of ``size`` bytes
    would take the user's stored files past ``MAX_STORED_BYTES_PER_USER``."""
    quota = _rate(UPLOADS, agent_settings.UPLOADS_PER_MINUTE, _uses(QuotaUse.Kind.UPLOAD, user_id))
    if quota.reached:
        raise _refusal(TooManyUploads, quota)
    stored = _stored(user_id)
    if stored.cap and stored.used + size > stored.cap:
        raise _refusal(StorageFull, stored, size=size)


def count_upload(user_id: Any) -> None:
    """Count an upload, in the transaction that stores its file, for the minute whatever becomes of the file."""
    _count(QuotaUse.Kind.UPLOAD, user_id)


def take_transcription(user_id: Any) -> None:
    """Count a recording about to be transcribed; ``TooManyTranscriptions`` past ``TRANSCRIPTIONS_PER_MINUTE``.

    Counted before the recording is sent (in its own transaction, the user's row held), so
    recordings sent at once cannot pass the cap while the speech host works on them."""
    with transaction.atomic():
        hold(user_id)
        quota = _rate(
            TRANSCRIPTIONS, agent_settings.TRANSCRIPTIONS_PER_MINUTE, _uses(QuotaUse.Kind.TRANSCRIPTION, user_id)
        )
        if quota.reached:
            raise _refusal(TooManyTranscriptions, quota)
        _count(QuotaUse.Kind.TRANSCRIPTION, user_id)


def take_link_try(chat_id: int) -> bool:
    """Count a Telegram chat's try of a link token; False past ``TELEGRAM_LINK_TRIES_PER_MINUTE``."""
    cap = agent_settings.TELEGRAM_LINK_TRIES_PER_MINUTE
    if _rate("telegram_link_tries", cap, _uses(QuotaUse.Kind.TELEGRAM_LINK, chat_id)).reached:
        return False
    _count(QuotaUse.Kind.TELEGRAM_LINK, chat_id)
    return True


def take_registration(address: str) -> bool:
    """Count an OAuth client's registration from this IP address; False past ``MCP_REGISTRATIONS_PER_MINUTE``."""
    cap = agent_settings.MCP_REGISTRATIONS_PER_MINUTE
    if _rate("mcp_registrations", cap, _uses(QuotaUse.Kind.MCP_REGISTRATION, address)).reached:
        return False
    _count(QuotaUse.Kind.MCP_REGISTRATION, address)
    return True


def usage(user_id: Any) -> list[Standing[int]]:
    """Where the user stands against each quota now, for the "My assistant" panel."""
    return [
        _stored(user_id),
        _rate(NEW_CHATS, agent_settings.NEW_CHATS_PER_MINUTE, Conversation.objects.filter(user_id=user_id)),
        _rate(UPLOADS, agent_settings.UPLOADS_PER_MINUTE, _uses(QuotaUse.Kind.UPLOAD, user_id)),
        _rate(TRANSCRIPTIONS, agent_settings.TRANSCRIPTIONS_PER_MINUTE, _uses(QuotaUse.Kind.TRANSCRIPTION, user_id)),
    ]


def forget_old_uses() -> int:
    """Delete the counted uses that no quota counts any more (the nightly clean-up); how many went."""
    return QuotaUse.objects.filter(created_at__lt=timezone.now() - WINDOW).delete()[0]


def panel_text(quota: Standing[int]) -> str:
    """The quota as the panel shows it: used and cap, or when reached, what the refusal says."""
    if quota.reached:
        return message(quota)
    values: dict[str, Any] = {"used": quota.used, "cap": quota.cap}
    if quota.limit == STORED_BYTES:
        values = {"used": filesizeformat(quota.used), "cap": filesizeformat(quota.cap)}
    template = _PANEL[quota.limit][0 if quota.cap else 1]
    return str(template) % values


_PANEL = {
    STORED_BYTES: (gettext_lazy("Stored files: %(used)s of %(cap)s"), gettext_lazy("Stored files: %(used)s")),
    NEW_CHATS: (
        gettext_lazy("New chats in the last minute: %(used)s of %(cap)s"),
        gettext_lazy("New chats in the last minute: %(used)s"),
    ),
    UPLOADS: (
        gettext_lazy("Files added in the last minute: %(used)s of %(cap)s"),
        gettext_lazy("Files added in the last minute: %(used)s"),
    ),
    TRANSCRIPTIONS: (
        gettext_lazy("Recordings transcribed in the last minute: %(used)s of %(cap)s"),
        gettext_lazy("Recordings transcribed in the last minute: %(used)s"),
    ),
}


def message(quota: Standing[int], **extra: Any) -> str:
    """The quota in words, in the active language."""
    values: dict[str, Any]
    if quota.limit == STORED_BYTES:
        values = {"used": filesizeformat(quota.used), "cap": filesizeformat(quota.cap)}
        if "size" not in extra:
            return gettext("Your files take %(used)s of the %(cap)s you may store.") % values
        values["size"] = filesizeformat(extra["size"])
        return (
            gettext(
                "This file (%(size)s) does not fit: your files take %(used)s of the %(cap)s you may store. "
                "Remove files you no longer need."
            )
            % values
        )
    values = {"used": quota.used, "cap": quota.cap}
    if quota.limit == NEW_CHATS:
        made = ngettext(
            "You started %(used)s chat in the last minute, the most allowed is %(cap)s.",
            "You started %(used)s chats in the last minute, the most allowed is %(cap)s.",
            quota.used,
        )
    elif quota.limit == TRANSCRIPTIONS:
        made = ngettext(
            "You sent %(used)s recording in the last minute, the most allowed is %(cap)s.",
            "You sent %(used)s recordings in the last minute, the most allowed is %(cap)s.",
            quota.used,
        )
    else:
        made = ngettext(
            "You added %(used)s file in the last minute, the most allowed is %(cap)s.",
            "You added %(used)s files in the last minute, the most allowed is %(cap)s.",
            quota.used,
        )
    seconds = 1
    if quota.frees_at is not None:
        seconds = max(1, math.ceil((quota.frees_at - timezone.now()).total_seconds()))
    wait = ngettext("Try again in %(seconds)s second.", "Try again in %(seconds)s seconds.", seconds)
    return f"{made % values} {wait % {'seconds': seconds}}"


def _refusal(kind: type[Refusal], quota: Standing[int], **extra: Any) -> Refusal:
    return kind(**quota.params(numbers=True), **extra, message=message(quota, **extra))


def _rate(limit: str, cap: int, rows: QuerySet[Any]) -> Standing[int]:
    """Rows made in the last minute against ``cap``; when reached, the moment the oldest one that
    keeps the count at the cap leaves the window."""
    since = timezone.now() - WINDOW
    recent = rows.filter(created_at__gte=since).order_by()
    if not cap:
        return Standing(limit, 0, recent.count())
    times = list(recent.order_by("-created_at").values_list("created_at", flat=True)[:cap])
    if len(times) < cap:
        return Standing(limit, cap, len(times))
    return Standing(limit, cap, recent.count(), times[-1] + WINDOW)


def _uses(kind: str, key: Any) -> QuerySet[QuotaUse]:
    return QuotaUse.objects.filter(kind=kind, key=str(key))


def _count(kind: str, key: Any) -> None:
    """One use now; this key's uses that left the window go, so a key keeps at most a minute's."""
    now = timezone.now()
    _uses(kind, key).filter(created_at__lt=now - WINDOW).delete()
    QuotaUse.objects.create(kind=kind, key=str(key), created_at=now)


def _stored(user_id: Any) -> Standing[int]:
    total = Attachment.objects.filter(user_id=user_id).order_by().aggregate(total=Sum("size"))["total"] or 0
    return Standing(STORED_BYTES, int(agent_settings.MAX_STORED_BYTES_PER_USER), int(total))
