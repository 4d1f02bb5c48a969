"""Updates from Telegram: recorded once by their id (webhook or reader), then handled in a task.

A private chat linked to a user (``links``) talks to that user's current chat: a text becomes a turn,
a voice note is transcribed and sent as the user's spoken message, a photo or a document becomes a
file of the chat, and a press on a card's button confirms or cancels it, each for the link's actor
through the same doors as the page. What cannot be done is answered with a sentence in the user's
language, never a code.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from .. import confirmations, conversations, notices, turns, voice
from ..access import TelegramRef
from ..attachments import api as files
from ..attachments import extraction
from ..core import errors
from ..core.conf import agent_settings
from ..models import Attachment, Conversation, TelegramButtons, TelegramLink, TelegramUpdate
from ..step_labels import tool_title
from . import delivery, formatting, links
from .bot import BotError, call, note_update

logger = logging.getLogger(__name__)

HANDLE_TASK = "agent.telegram_update"
TELEGRAM_FILE_BYTES = 20 * 1024 * 1024
"""The largest file the Bot API lets a bot download."""
CHATS_LISTED = 8
UPDATE_IDS = range(-(2**63), 2**63)
"""What the update's column holds (a signed 64-bit integer); Telegram's ids are far inside it."""


def record(update: dict[str, Any]) -> bool:
    """Keep an update for its task, once per ``update_id``; False for one already recorded."""
    update_id = update.get("update_id")
    if type(update_id) is not int or not UPDATE_IDS.start <= update_id < UPDATE_IDS.stop:
        return False
    try:
        with transaction.atomic():
            TelegramUpdate.objects.create(update_id=update_id, payload=update)
    except IntegrityError:
        return False
    transaction.on_commit(lambda: delivery.queue(HANDLE_TASK, update_id))
    return True


def handle(update_id: int) -> None:
    """Handle a recorded update, at most once: it is marked handled (its body dropped) before it runs."""
    with transaction.atomic():
        row = TelegramUpdate.objects.select_for_update().filter(update_id=update_id, handled_at=None).first()
        if row is None:
            return
        payload = row.payload or {}
        TelegramUpdate.objects.filter(pk=row.pk).update(handled_at=timezone.now(), payload=None)
    note_update()
    from telegram import Update

    update = Update.de_json(payload, None)
    try:
        if update.callback_query is not None:
            _press(update.callback_query)
        elif update.message is not None:
            _message(update.message)
    except BotError as error:
        logger.warning("agent telegram: update %s: the answer could not be sent (%s)", update_id, error.kind)


# -- messages --------------------------------------------------------------------------------------


def _message(message: Any) -> None:
    chat, sender = message.chat, message.from_user
    telegram_language = _offered(getattr(sender, "language_code", None))
    text = (message.text or message.caption or "").strip()
    if chat.type != "private":
        if text.startswith("/start"):
            with translation.override(telegram_language):
                _reply(chat.id, _("I talk only in a private chat. Open a chat with me to connect."))
        return
    command, _space, argument = text.partition(" ")
    command = command.split("@", 1)[0] if command.startswith("/") else ""
    if command == "/start" and argument:
        _link(chat.id, sender, argument.strip(), telegram_language)
        return
    link = links.live_link(chat.id)
    if link is None:
        with translation.override(telegram_language):
            _reply(
                chat.id,
                _("This chat is not connected yet. On the site, open the assistant and choose Connect Telegram."),
            )
        return
    actor = TelegramRef(link.pk, link.user_id)
    with translation.override(delivery.link_language(link)):
        try:
            if command:
                _command(link, actor, command)
            else:
                _ask(link, actor, message, text)
        except errors.Refusal as refusal:
            _reply(chat.id, refusal.message)
        except ValidationError as invalid:
            _reply(chat.id, _invalid(invalid))


def _link(chat_id: int, sender: Any, token: str, language: str) -> None:
    name = " ".join(part for part in (sender.first_name, sender.last_name) if part) if sender else ""
    with translation.override(language):
        linked = links.link(token, chat_id, name=name, language=language)
        if linked.link is None:
            _reply(chat_id, linked.refusal)
            return
    with translation.override(delivery.link_language(linked.link)):
        _reply(
            chat_id,
            _(
                "Connected. Write to me here as you would on the site: I answer with your rights, and every change "
                "waits for your Confirm. /new starts a chat, /chats switches chats, /stop disconnects."
            ),
        )


def _command(link: TelegramLink, actor: TelegramRef, command: str) -> None:
    if command == "/stop":
        links.revoke_where(pk=link.pk)
        _reply(link.chat_id, _("Disconnected. Connect again from the site whenever you like."))
    elif command == "/new":
        conversation = conversations.create_conversation(actor, {}, impersonated=False)
        TelegramLink.objects.filter(pk=link.pk).update(conversation=conversation)
        _reply(link.chat_id, _("A new chat. What can I do for you?"))
    elif command == "/chats":
        _list_conversations(link, actor)
    elif command == "/cancel":
        current = link.conversation
        stopped = current is not None and turns.stop(actor, current.pk, impersonated=False)
        _reply(link.chat_id, _("Stopping.") if stopped else _("Nothing is running."))
    else:
        _reply(
            link.chat_id,
            _(
                "Write your request, or send a voice note, a photo or a document. /new starts a chat, /chats switches "
                "chats, /cancel stops the assistant, /stop disconnects."
            ),
        )


def _ask(link: TelegramLink, actor: TelegramRef, message: Any, text: str) -> None:
    """A message to the assistant: its files are taken first, a voice note is transcribed; then a turn."""
    conversation = _current_conversation(link, actor)
    spoken = False
    if message.voice is not None or message.audio is not None:
        text = voice.transcribe(actor, conversation.pk, _download(message.voice or message.audio), impersonated=False)
        if not text:
            _reply(link.chat_id, _("I heard nothing I could write down. Try again, a little closer to the microphone."))
            return
        _reply(link.chat_id, "🎤 " + text)
        spoken = True
    upload = _upload_of(message)
    if upload is not None:
        name, file_id, size = upload
        if size and size > TELEGRAM_FILE_BYTES:
            _reply(link.chat_id, _("Telegram lets me read files of at most 20 MB."))
            return
        attachment = files.add_attachment(
            actor, conversation.pk, ContentFile(_download_id(file_id), name=name), impersonated=False
        )
        extraction.process(attachment.pk)  # read now: the turn below needs it ready
        if not text:
            _reply(link.chat_id, _("I have the file. What should I do with it?"))
            return
    ready = [
        a.pk
        for a in files.list_unlinked(actor, conversation.pk, impersonated=False)
        if a.status == Attachment.Status.READY
    ]
    turns.start(
        actor, conversation.pk, text, attachment_ids=ready, impersonated=False, language=link.language, spoken=spoken
    )
    _typing(link.chat_id)


def _current_conversation(link: TelegramLink, actor: TelegramRef) -> Conversation:
    """The link's chat, or a new one when it has none (or it was deleted)."""
    conversation = link.conversation
    if conversation is not None and conversation.status != Conversation.Status.DELETED:
        try:
            conversations.authorize_conversation(actor, conversation.pk, impersonated=False)
            return conversation
        except errors.NotFound:
            pass
    conversation = conversations.create_conversation(actor, {}, impersonated=False)
    TelegramLink.objects.filter(pk=link.pk).update(conversation=conversation)
    link.conversation = conversation
    return conversation


def _list_conversations(link: TelegramLink, actor: TelegramRef) -> None:
    page = conversations.list_conversations(actor, impersonated=False, limit=CHATS_LISTED)
    latest = list(page.conversations)
    if not latest:
        _reply(link.chat_id, _("You have no chats yet. Write to me to start one."))
        return
    choices = [[(conversation.title or _("Untitled chat"), str(index))] for index, conversation in enumerate(latest)]
    text = formatting.escape(_("Your latest chats. Pick one to go on with it:"))
    delivery.send_with_buttons(
        link, text, choices, TelegramButtons.Kind.CHATS, chats=[str(conversation.pk) for conversation in latest]
    )


# -- presses ---------------------------------------------------------------------------------------


def _press(query: Any) -> None:
    """A button pressed: every press is answered, whatever comes of it."""
    token, _colon, choice = str(query.data or "").partition(":")
    buttons = TelegramButtons.objects.filter(token=token).select_related("link", "link__conversation").first()
    chat_id = query.message.chat.id if query.message is not None else None
    if buttons is None or buttons.link.revoked_at is not None or buttons.link.chat_id != chat_id:
        with translation.override(_offered(getattr(query.from_user, "language_code", None))):
            _answer_press(query.id, _("This button no longer works."))
        return
    link = buttons.link
    actor = TelegramRef(link.pk, link.user_id)
    with translation.override(delivery.link_language(link)):
        try:
            text = (
                _card_press(actor, buttons, choice)
                if buttons.kind == TelegramButtons.Kind.CARD
                else _switch(link, actor, buttons, choice)
            )
        except errors.Refusal as refusal:
            text = refusal.message
        except ValidationError as invalid:
            text = _invalid(invalid)
        _answer_press(query.id, text)


def _card_press(actor: TelegramRef, buttons: TelegramButtons, choice: str) -> str:
    confirmation_id = buttons.confirmation_id
    if choice == delivery.CONFIRM:
        confirmation = confirmations.confirm(actor, confirmation_id or "", impersonated=False)
    elif choice == delivery.CANCEL:
        confirmation = confirmations.cancel(actor, confirmation_id or "", impersonated=False)
    else:
        return _("This button no longer works.")
    try:
        delivery.card_decided(confirmation.pk)  # at once here; the outcome's own task edits it to the same text
    except BotError:
        pass  # that task edits it then: the press is answered now, whatever Telegram says

    return notices.text(f"confirmation_{confirmation.status}", {"tool": tool_title(confirmation.tool_name)})


def _switch(link: TelegramLink, actor: TelegramRef, buttons: TelegramButtons, choice: str) -> str:
    try:
        conversation_id = buttons.chats[int(choice)]
    except (IndexError, TypeError, ValueError):
        return _("This button no longer works.")
    _scope, conversation = conversations.authorize_conversation(actor, conversation_id, impersonated=False)
    TelegramLink.objects.filter(pk=link.pk).update(conversation=conversation)
    title = conversation.title or _("Untitled chat")
    try:  # the list says where the chat is now; the press's answer says it anyway
        delivery.edit(link.chat_id, buttons.message_id, _("Now in: %(title)s") % {"title": formatting.escape(title)})
    except BotError:
        pass
    return _("Now in: %(title)s") % {"title": title}


# -- Telegram calls --------------------------------------------------------------------------------


def _reply(chat_id: int, text: str) -> None:
    """A sentence of ours (or the user's own words) as a message: plain text, escaped."""
    delivery.send(chat_id, formatting.escape(text))


def _answer_press(query_id: str, text: str) -> None:
    async def make(bot: Any) -> Any:
        return await bot.answer_callback_query(query_id, text=text[:200])

    try:
        call(make)
    except BotError:
        pass  # Telegram stops waiting for the answer after a while; nothing else depends on it


def _typing(chat_id: int) -> None:
    async def make(bot: Any) -> Any:
        return await bot.send_chat_action(chat_id, "typing")

    try:
        call(make)
    except BotError:
        pass


def _upload_of(message: Any) -> tuple[str, str, int] | None:
    """A photo (its largest size) or a document: its name, file id and size."""
    if message.photo:
        photo = message.photo[-1]
        return f"photo-{message.message_id}.jpg", photo.file_id, photo.file_size or 0
    if message.document is not None:
        document = message.document
        return document.file_name or f"file-{message.message_id}", document.file_id, document.file_size or 0
    return None


def _download(media: Any) -> bytes:
    if media.file_size and media.file_size > agent_settings.MAX_VOICE_BYTES:
        raise voice.too_large()
    return _download_id(media.file_id)


def _download_id(file_id: str) -> bytes:
    async def make(bot: Any) -> bytes:
        found = await bot.get_file(file_id)
        return bytes(await found.download_as_bytearray())

    return call(make)


# -- languages -------------------------------------------------------------------------------------


def _offered(code: str | None) -> str:
    """Telegram's language for the user, where the site offers it; else the site's."""
    offered = dict(settings.LANGUAGES)
    if code and code in offered:
        return code
    if code and code.split("-")[0] in offered:
        return code.split("-")[0]
    return settings.LANGUAGE_CODE


def _invalid(invalid: ValidationError) -> str:
    return str(errors.invalid_body(invalid)["message"])


KEEP_DAYS = 7


def purge() -> int:
    """Forget what Telegram's side no longer needs: handled updates and used or expired link tokens
    after ``KEEP_DAYS``, buttons of chat lists after as long, and a card's once it is decided."""
    from datetime import timedelta

    from django.db.models import Q

    from ..models import Confirmation, TelegramLinkToken

    before = timezone.now() - timedelta(days=KEEP_DAYS)
    removed = TelegramUpdate.objects.filter(received_at__lt=before).exclude(handled_at=None).delete()[0]
    removed += TelegramLinkToken.objects.filter(expires_at__lt=before).delete()[0]
    stale = Q(kind=TelegramButtons.Kind.CHATS, created_at__lt=before) | Q(
        kind=TelegramButtons.Kind.CARD, created_at__lt=before
    ) & ~Q(confirmation__status=Confirmation.Status.WAITING)
    return removed + TelegramButtons.objects.filter(stale).delete()[0]
