"""What a turn asked for in Telegram says back there: its answers (streamed into one message while the
model writes), its cards with Confirm / Cancel, its notices; a card made outside a turn (an MCP client's
write), shown in every chat the user linked; and a card decided anywhere, edited to its outcome in
Telegram too.

Stored messages are delivered by a task per turn (``deliver``), in order, each once: the turn's row
keeps how far delivery got, and a lease lets one task at a time deliver a turn. Answers and cards go
only while the link is live and its user may still use the assistant; nothing goes to a revoked link.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import uuid
from typing import Any

from celery import current_app
from django.db import connection, transaction
from django.utils import translation
from django.utils.translation import gettext as _

from ..access import TelegramRef, authorize_session, language_for
from ..core import errors
from ..core.conf import agent_settings
from ..core.ids import ConfirmationId, MessageId, TurnId
from ..models import (
    Confirmation,
    Message,
    TelegramButtons,
    TelegramDraft,
    TelegramLink,
    TelegramTurn,
    Turn,
    UserSettings,
)
from ..turns import locks
from . import formatting
from .bot import RATE_LIMITED, UNCHANGED, BotError, call, config

logger = logging.getLogger(__name__)

DELIVER_TASK = "agent.telegram_deliver"
CARD_TASK = "agent.telegram_card"
SHOW_CARD_TASK = "agent.telegram_show_card"
WAIT_AT_MOST_S = 30.0
"""A rate limit shorter than this is waited out in the task; a longer one sends the task again later."""
CONFIRM, CANCEL = "y", "n"


def queue(task: str, *args: Any, countdown: float | None = None) -> None:
    current_app.send_task(task, args=args, queue=agent_settings.TASK_QUEUE, countdown=countdown)


# -- what is stored reaches Telegram ------------------------------------------------------------


def message_stored(sender: Any, instance: Message, created: bool = False, **kwargs: Any) -> None:
    """``post_save`` of a message: after commit, deliver it when its turn was asked for in Telegram,
    and edit a card shown in Telegram when its outcome is stored (wherever it was decided)."""
    if not created or agent_settings.TELEGRAM is None or instance.role == Message.Role.USER:
        return
    if instance.turn_id is not None:
        if _telegram_turn(instance):
            turn_id = str(instance.turn_id)
            transaction.on_commit(lambda: queue(DELIVER_TASK, turn_id))
    elif instance.role == Message.Role.TOOL and instance.confirmation_id is not None:
        confirmation_id = str(instance.confirmation_id)  # a card no turn made: an MCP client's write
        transaction.on_commit(lambda: queue(SHOW_CARD_TASK, confirmation_id))
    elif instance.confirmation_id is not None and instance.notice_code.startswith("confirmation_"):
        confirmation_id = str(instance.confirmation_id)
        if TelegramButtons.objects.filter(confirmation_id=confirmation_id).exists():
            transaction.on_commit(lambda: queue(CARD_TASK, confirmation_id))


def _telegram_turn(message: Message) -> bool:
    """Whether the message's turn runs for a Telegram link: no query when the row came with its turn."""
    if Message.turn.is_cached(message):
        return message.turn is not None and message.turn.telegram_link_id is not None
    return Turn.objects.filter(pk=str(message.turn_id), telegram_link__isnull=False).exists()


def deliver(turn_id: TurnId) -> None:
    """Send the turn's messages that Telegram has not had yet, in order; one task at a time per turn."""
    turn = Turn.objects.select_related("telegram_link").filter(pk=turn_id).first()
    if turn is None or turn.telegram_link is None:
        return
    name, holder = locks.telegram_delivery_lock(turn.pk), uuid.uuid4()
    if not locks.hold(name, holder):
        return  # another task delivers this turn; it reads again before it lets go
    try:
        delivered = _deliver_pending(turn, turn.telegram_link, name, holder)
    except BotError as error:
        if error.kind == RATE_LIMITED:
            queue(DELIVER_TASK, str(turn.pk), countdown=error.retry_after)
        return
    finally:
        locks.release_names([name], holder)
    if Message.objects.filter(turn_id=turn.pk, seq__gt=delivered).exclude(role=Message.Role.USER).exists():
        deliver(turn_id)  # stored while this task let go of the turn: its own task found the lease taken


def _deliver_pending(turn: Turn, link: TelegramLink, name: str, holder: Any) -> int:
    state, _created = TelegramTurn.objects.get_or_create(turn_id=turn.pk)
    pending = (
        Message.objects.filter(turn_id=turn.pk, seq__gt=state.delivered_seq)
        .exclude(role=Message.Role.USER)
        .select_related("confirmation")
        .order_by("seq")
    )
    live = _live(link)
    with translation.override(turn.language):
        for message in pending:
            try:
                if link.revoked_at is None:
                    _deliver_one(link, message, live)
            except BotError as error:
                if error.kind == RATE_LIMITED:
                    raise
                logger.warning(
                    "agent telegram: turn %s: message %s not delivered (%s)", turn.pk, message.pk, error.kind
                )
            TelegramTurn.objects.filter(pk=turn.pk).update(delivered_seq=message.seq)
            state.delivered_seq = message.seq
            locks.hold(name, holder)
    if Turn.objects.filter(pk=turn.pk).exclude(status__in=Turn.LIVE).exists():
        _drop_drafts(link, turn)
    return state.delivered_seq


def _live(link: TelegramLink) -> bool:
    """Whether the link may be told what the assistant says: not revoked, its user's rights held now."""
    try:
        authorize_session(TelegramRef(link.pk, link.user_id), impersonated=False)
    except errors.Refusal:
        return False
    return True


def _deliver_one(link: TelegramLink, message: Message, live: bool) -> None:
    role = message.role
    if role == Message.Role.NOTICE and not message.notice_code.startswith("confirmation_"):
        send(link.chat_id, formatting.notice_text(message.notice_code, message.notice_params or {}))
    elif not live:
        _drop_draft(link, message.pk)
    elif role == Message.Role.ASSISTANT:
        _answer(link, message)
    elif role == Message.Role.TOOL and message.confirmation is not None:
        show_card(link, message.confirmation)


def _answer(link: TelegramLink, message: Message) -> None:
    """An answer as Telegram messages: the first into the message its draft streamed in, if any."""
    pieces = formatting.messages(message.content)
    draft = TelegramDraft.objects.filter(pk=message.pk).first()
    if draft is not None:
        first = pieces.pop(0) if pieces else None
        if first is None:
            _delete(link.chat_id, draft.message_id)
        else:
            try:
                edit(link.chat_id, draft.message_id, first)
            except BotError as error:
                if error.kind == RATE_LIMITED:
                    raise
                pieces.insert(0, first)  # the draft's message is gone: the answer comes anew
        draft.delete()
    for piece in pieces:
        send(link.chat_id, piece)


def show_card(link: TelegramLink, confirmation: Confirmation) -> None:
    """A card as a message with Confirm / Cancel while it waits; a decided one with its outcome."""
    if confirmation.status != Confirmation.Status.WAITING:
        send(link.chat_id, formatting.card_text(confirmation.tool_name, confirmation.preview, confirmation.status))
        return
    choices = [[(_("Confirm"), CONFIRM), (_("Cancel"), CANCEL)]]
    text = formatting.card_text(confirmation.tool_name, confirmation.preview)
    send_with_buttons(link, text, choices, TelegramButtons.Kind.CARD, confirmation=confirmation)


def send_with_buttons(
    link: TelegramLink, text_html: str, choices: list[list[tuple[str, str]]], kind: str, **fields: Any
) -> TelegramButtons:
    """A message with buttons; a press carries ``<token>:<choice>``, and the token (random, saying
    nothing) finds what the buttons stand for (``fields``: the card, or the chats listed)."""
    token = secrets.token_urlsafe(12)
    keyboard = [[(label, f"{token}:{choice}") for label, choice in row] for row in choices]
    # Stored before it is sent, so a press that comes at once finds what it stands for.
    buttons = TelegramButtons.objects.create(token=token, link=link, message_id=0, kind=kind, **fields)
    try:
        buttons.message_id = send(link.chat_id, text_html, keyboard=keyboard)
    except BaseException:
        buttons.delete()
        raise
    TelegramButtons.objects.filter(pk=buttons.pk).update(message_id=buttons.message_id)
    return buttons


def show_everywhere(confirmation_id: ConfirmationId, link_id: int | None = None) -> None:
    """A waiting card no turn made, as a message with Confirm / Cancel in each live chat its user
    linked (or in ``link_id`` alone, sent again after a rate limit)."""
    confirmation = Confirmation.objects.filter(pk=confirmation_id, status=Confirmation.Status.WAITING).first()
    if confirmation is None:
        return
    chats = TelegramLink.objects.filter(user_id=confirmation.user_id, revoked_at__isnull=True)
    for link in chats.filter(pk=link_id) if link_id is not None else chats:
        if not _live(link):
            continue
        try:
            with translation.override(link_language(link)):
                show_card(link, confirmation)
        except BotError as error:
            if error.kind == RATE_LIMITED:
                queue(SHOW_CARD_TASK, str(confirmation.pk), link.pk, countdown=error.retry_after)
            else:
                logger.warning("agent telegram: card %s not shown in link %s: %s", confirmation.pk, link.pk, error.kind)


def link_language(link: TelegramLink) -> str:
    """What a linked chat is written to in: the user's own language, else Telegram's, else the site's."""
    own = UserSettings.objects.filter(user_id=link.user_id).first()
    return language_for(own, link.language or None)


def card_decided(confirmation_id: ConfirmationId) -> None:
    """Edit every Telegram message of a decided card to its outcome, without its buttons.

    The buttons' rows stay (the purge takes them when they are old): a press that
    Telegram still delivers, however late, finds its card and hears it was already decided.
    An edit to the same text is no change, so the press's and the outcome's own edit can both run.
    """
    confirmation = Confirmation.objects.filter(pk=confirmation_id).select_related("turn").first()
    if confirmation is None or confirmation.status == Confirmation.Status.WAITING:
        return
    shown = TelegramButtons.objects.filter(confirmation=confirmation, kind=TelegramButtons.Kind.CARD).select_related(
        "link"
    )
    for buttons in shown:  # in the turn's language; a card no turn made (an MCP client's), in the chat's
        language = confirmation.turn.language if confirmation.turn is not None else link_language(buttons.link)
        try:
            with translation.override(language):
                text = formatting.card_text(confirmation.tool_name, confirmation.preview, confirmation.status)
            edit(buttons.link.chat_id, buttons.message_id, text)
        except BotError as error:
            if error.kind == RATE_LIMITED:
                queue(CARD_TASK, str(confirmation.pk), countdown=error.retry_after)
                return


def _drop_drafts(link: TelegramLink, turn: Turn) -> None:
    """A turn that ended leaves no draft behind: one whose answer was never stored (a revocation) goes."""
    for draft in TelegramDraft.objects.filter(turn=turn):
        _delete(link.chat_id, draft.message_id)
        draft.delete()


def _drop_draft(link: TelegramLink, answer_id: MessageId) -> None:
    draft = TelegramDraft.objects.filter(pk=answer_id).first()
    if draft is not None:
        _delete(link.chat_id, draft.message_id)
        draft.delete()


# -- the Bot API, waiting out short rate limits ----------------------------------------------------


def send(
    chat_id: int, text_html: str, *, keyboard: list[list[tuple[str, str]]] | None = None, patient: bool = True
) -> int:
    """Send a message (Telegram's HTML); its id. ``patient``: wait out a short rate limit first."""

    async def make(bot: Any) -> Any:
        return await bot.send_message(chat_id, text_html, parse_mode="HTML", reply_markup=_markup(keyboard))

    return int((_patiently(make) if patient else call(make)).message_id)


def edit(chat_id: int, message_id: int, text_html: str, *, patient: bool = True) -> None:
    """Change a message's text (and take its buttons off); an edit to the same text is no change."""

    async def make(bot: Any) -> Any:
        return await bot.edit_message_text(text_html, chat_id=chat_id, message_id=message_id, parse_mode="HTML")

    try:
        _patiently(make) if patient else call(make)
    except BotError as error:
        if error.kind != UNCHANGED:
            raise


def _delete(chat_id: int, message_id: int) -> None:
    async def make(bot: Any) -> Any:
        return await bot.delete_message(chat_id, message_id)

    try:
        _patiently(make)
    except BotError as error:
        if error.kind == RATE_LIMITED:
            raise


def _patiently(make: Any) -> Any:
    """A call, once more after a rate limit short enough to wait out here."""
    try:
        return call(make)
    except BotError as error:
        if error.kind != RATE_LIMITED or error.retry_after > WAIT_AT_MOST_S:
            raise
        time.sleep(error.retry_after)
    return call(make)


def _markup(keyboard: list[list[tuple[str, str]]] | None) -> Any:
    if not keyboard:
        return None
    from telegram import InlineKeyboardButton, InlineKeyboardMarkup

    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(text, callback_data=data) for text, data in row] for row in keyboard]
    )


# -- the answer while the model writes it ----------------------------------------------------------


class DraftMirror:
    """One round's answer, streamed into one Telegram message: sent with its first words, then edited
    at most once per ``TELEGRAM_EDIT_INTERVAL_MS`` from a thread of its own, so the model's stream
    never waits for Telegram. ``close`` records the message for the stored answer to take over."""

    PREVIEW_CHARS = 4000

    def __init__(self, turn: Turn, answer_id: MessageId, chat_id: int) -> None:
        self.turn_id = turn.pk
        self.answer_id = answer_id
        self.chat_id = chat_id
        self.interval = agent_settings.TELEGRAM_EDIT_INTERVAL_MS / 1000
        self.lock = threading.Lock()
        self.latest = ""
        self.message_id: int | None = None
        self.wake = threading.Event()
        self.closed = threading.Event()
        self.thread: threading.Thread | None = None

    def show(self, text: str) -> None:
        with self.lock:
            self.latest = text
            if self.thread is None and not self.closed.is_set():
                self.thread = threading.Thread(
                    target=self._run, name=f"agent-telegram-draft-{self.turn_id}", daemon=True
                )
                self.thread.start()
        self.wake.set()

    def close(self) -> None:
        self.closed.set()
        self.wake.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        if self.message_id is not None:
            TelegramDraft.objects.update_or_create(
                pk=self.answer_id, defaults={"turn_id": self.turn_id, "message_id": self.message_id}
            )

    def _run(self) -> None:
        try:
            self._mirror()
        finally:
            connection.close()  # the health record's connection, opened in this thread

    def _mirror(self) -> None:
        shown = ""
        while not self.closed.is_set():
            self.wake.wait()
            self.wake.clear()
            with self.lock:
                text = self.latest
            if self.closed.is_set() or text == shown:
                continue
            preview = formatting.escape(text[: self.PREVIEW_CHARS] + ("…" if len(text) > self.PREVIEW_CHARS else ""))
            try:
                if self.message_id is None:
                    self.message_id = send(self.chat_id, preview, patient=False)
                else:
                    edit(self.chat_id, self.message_id, preview, patient=False)
                shown = text
                self.closed.wait(self.interval)
            except BotError as error:
                if error.kind != RATE_LIMITED:
                    return  # the stored answer still comes, as a message of its own
                self.closed.wait(error.retry_after)


def draft_mirror(turn: Turn, answer_id: MessageId) -> DraftMirror | None:
    """The follower of a round of a turn asked for in Telegram (``agent.turns.stream.follow``)."""
    if turn.telegram_link_id is None or config() is None:
        return None
    link = turn.telegram_link
    if link is None or link.revoked_at is not None:
        return None
    return DraftMirror(turn, answer_id, link.chat_id)
