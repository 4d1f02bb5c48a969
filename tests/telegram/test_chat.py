"""A linked Telegram chat talks to the user's assistant: messages become turns run by a real Celery worker,
answers come back as Telegram messages (streamed into one, edited at most once a second), cards carry
Confirm / Cancel and stay in step with the web page, and a revoked link stops the turn at its next step."""

from __future__ import annotations

from typing import Any

import pytest

from agent import confirmations, conversations
from agent.access import SessionRef
from agent.models import Confirmation, Message, TelegramLink, Turn
from agent.telegram import revoke, updates
from tests.notes.models import Note
from tests.support.model_server import ScriptedModelServer, answer, tool_calls
from tests.support.telegram import connect
from tests.support.telegram_api import FakeBotApi, Sent
from tests.support.turns import WORDS, messages_of, wait_ended
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
CHAT = 7001


@pytest.fixture
def linked(worker: Any, bot_api: FakeBotApi, ref: SessionRef, endpoint: Any) -> TelegramLink:
    link = connect(bot_api, ref, CHAT, inline=False)
    reply_seen(bot_api, "Connected")
    return link


def says(api: FakeBotApi, text: str) -> None:
    updates.record(api.says(CHAT, text))


def last_turn() -> Turn:
    return wait_until(lambda: Turn.objects.order_by("-created_at").first(), what="a turn")


def reply_seen(api: FakeBotApi, text: str, timeout: float = 15) -> Sent:
    return wait_until(
        lambda: next((m for m in api.chat(CHAT) if text in m.text), None),
        timeout,
        f"a Telegram message with {text!r}",
        why=lambda: repr(api.texts(CHAT)),
    )


def card_seen(api: FakeBotApi) -> Sent:
    return wait_until(lambda: next((m for m in api.chat(CHAT) if m.buttons), None), 15, "a card with buttons")


def test_a_message_becomes_a_turn_in_the_users_chat_and_its_answer_a_message(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("You have **two** notes."))
    says(bot_api, "how many notes do I have?")
    turn = wait_ended(last_turn())
    assert (turn.status, turn.telegram_link_id, turn.session_key) == ("finished", linked.pk, "")
    sent = reply_seen(bot_api, "You have")
    assert sent.text == "You have <b>two</b> notes."
    chat = TelegramLink.objects.get(pk=linked.pk).conversation
    assert chat is not None and turn.conversation_id == chat.pk and chat.user_id == linked.user_id
    assert [(m.role, m.content) for m in messages_of(chat)] == [
        ("user", "how many notes do I have?"),
        ("assistant", "You have **two** notes."),
    ]


def test_a_streamed_answer_goes_into_one_message_edited_at_most_once_a_second(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer(WORDS, chunk_delay=0.08))  # about three seconds of streaming
    says(bot_api, "tell me a lot")
    wait_ended(last_turn())
    final = reply_seen(bot_api, "word39")
    assert final.text == WORDS and final.edits  # the draft's message took the stored answer
    assert [m.text for m in bot_api.chat(CHAT) if "word0" in m.text] == [WORDS]  # one message, not several
    times = [final.sent_at, *final.edits]
    draft_edits = times[:-1]  # the last edit is the stored answer's, whenever it comes
    assert len(draft_edits) >= 2
    gaps = [later - earlier for earlier, later in zip(draft_edits, draft_edits[1:], strict=False)]
    assert min(gaps) >= 0.95, gaps


def test_a_card_is_confirmed_in_telegram_once_however_often_it_is_pressed(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    says(bot_api, "create a note: Buy milk")
    card = card_seen(bot_api)
    assert "Create a note" in card.text and "Buy milk" in card.text
    confirm = bot_api.button(card, "Confirm")
    assert len(confirm.encode()) <= 64 and "Buy milk" not in confirm
    updates.record(bot_api.presses(CHAT, card.message_id, confirm))
    updates.record(bot_api.presses(CHAT, card.message_id, confirm))
    wait_until(lambda: len(bot_api.answers) == 2, what="both presses answered")
    assert Note.objects.filter(title="Buy milk").count() == 1
    assert Confirmation.objects.get().status == "done"
    assert sorted(a.get("text") for a in bot_api.answers) == [
        "Done: Create a note.",
        "This request was already decided.",
    ]
    wait_until(lambda: not bot_api.messages[(CHAT, card.message_id)].buttons, what="the card's buttons gone")
    assert "Done: Create a note." in bot_api.messages[(CHAT, card.message_id)].text


def test_a_press_that_comes_after_the_card_was_decided_and_edited_hears_it_was_already_decided(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    # given: a card confirmed in Telegram, its message edited to the outcome, its buttons gone
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    says(bot_api, "create a note: Buy milk")
    card = card_seen(bot_api)
    confirm = bot_api.button(card, "Confirm")
    updates.record(bot_api.presses(CHAT, card.message_id, confirm))
    wait_until(lambda: not bot_api.messages[(CHAT, card.message_id)].buttons, what="the card's buttons gone")
    wait_until(lambda: len(bot_api.answers) == 1, what="the first press answered")
    # when: Telegram delivers a second press of the same button only now
    updates.record(bot_api.presses(CHAT, card.message_id, confirm))
    wait_until(lambda: len(bot_api.answers) == 2, what="the late press answered")
    # then: it gets the same answer as a press racing the first, and nothing runs twice
    assert [a.get("text") for a in bot_api.answers] == ["Done: Create a note.", "This request was already decided."]
    assert Note.objects.filter(title="Buy milk").count() == 1


def test_a_card_cancelled_in_telegram_runs_nothing(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    says(bot_api, "create a note: Buy milk")
    card = card_seen(bot_api)
    updates.record(bot_api.presses(CHAT, card.message_id, bot_api.button(card, "Cancel")))
    wait_until(lambda: Confirmation.objects.get().status == "cancelled", what="the card cancelled")
    assert not Note.objects.exists()
    wait_until(lambda: "Cancelled" in bot_api.messages[(CHAT, card.message_id)].text, what="the card edited")


def test_a_card_decided_on_the_web_page_is_edited_in_telegram(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer, ref: SessionRef
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    says(bot_api, "create a note: Buy milk")
    card = card_seen(bot_api)
    confirm = bot_api.button(card, "Confirm")
    confirmations.confirm(ref, Confirmation.objects.get().pk, impersonated=False)
    wait_until(lambda: not bot_api.messages[(CHAT, card.message_id)].buttons, what="the card's buttons gone")
    assert "Done: Create a note." in bot_api.messages[(CHAT, card.message_id)].text
    updates.record(bot_api.presses(CHAT, card.message_id, confirm))  # pressed in a Telegram not yet updated
    wait_until(lambda: bot_api.answers, what="the late press answered")
    assert bot_api.answers[0]["text"] == "This request was already decided." and Note.objects.count() == 1


def test_the_chat_is_live_on_the_web_page_too(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer, ref: SessionRef
) -> None:
    model_server.push(answer("Noted."))
    says(bot_api, "hello from Telegram")
    wait_ended(last_turn())
    chat = TelegramLink.objects.get(pk=linked.pk).conversation
    shown = conversations.list_messages(ref, chat.pk, impersonated=False)
    assert [(m["role"], m["content"]) for m in shown] == [("user", "hello from Telegram"), ("assistant", "Noted.")]


@pytest.mark.parametrize("revocation", ["unlinked", "deactivated", "permission removed"])
def test_a_revocation_mid_turn_stops_it_at_the_next_step(
    revocation: str, linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer, user: Any
) -> None:
    model_server.push(tool_calls(("notes_search", {"query": "x"}), delay=1.0), answer("never"))
    says(bot_api, "search my notes")
    wait_until(lambda: model_server.requests, what="the model called")
    if revocation == "unlinked":
        TelegramLink.objects.filter(pk=linked.pk).update(revoked_at=linked.created_at)
    elif revocation == "deactivated":
        type(user).objects.filter(pk=user.pk).update(is_active=False)
    else:
        user.user_permissions.remove(*user.user_permissions.filter(codename="use_telegram"))
    turn = wait_ended(last_turn())
    assert turn.status == "failed" and turn.end_reason in ("session_ended", "forbidden")
    assert len(model_server.requests) == 1  # no further model call
    assert not Message.objects.filter(role="tool").exists()  # and no tool ran


def test_revoking_one_link_leaves_the_users_other_links_and_sessions(
    linked: TelegramLink, bot_api: FakeBotApi, ref: SessionRef, model_server: ScriptedModelServer
) -> None:
    other = connect(bot_api, ref, CHAT + 1, inline=False)
    assert revoke(ref, linked.pk, impersonated=False)
    assert TelegramLink.objects.get(pk=other.pk).revoked_at is None
    conversations.list_conversations(ref, impersonated=False)  # the session still works


def test_new_starts_a_chat_and_chats_switches_back(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("first answer"), answer("second answer"))
    says(bot_api, "first question")
    wait_ended(last_turn())
    first = TelegramLink.objects.get(pk=linked.pk).conversation
    says(bot_api, "/new")
    reply_seen(bot_api, "A new chat")
    says(bot_api, "second question")
    wait_ended(wait_until(lambda: Turn.objects.exclude(conversation=first).first(), what="a turn in the new chat"))
    assert TelegramLink.objects.get(pk=linked.pk).conversation != first
    says(bot_api, "/chats")
    listing = wait_until(lambda: next((m for m in bot_api.chat(CHAT) if "latest chats" in m.text), None))
    titles = [row[0]["text"] for row in listing.buttons]
    assert titles == ["second question", "first question"]
    updates.record(bot_api.presses(CHAT, listing.message_id, listing.buttons[1][0]["callback_data"]))
    wait_until(
        lambda: TelegramLink.objects.get(pk=linked.pk).conversation == first,
        what="the switch",
        why=lambda: f"answers {bot_api.answers}, calls {[c.method for c in bot_api.calls]}",
    )


def test_a_press_from_another_chat_or_a_stale_button_does_nothing(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(tool_calls(("notes_create", {"title": "Buy milk"})))
    says(bot_api, "create a note: Buy milk")
    card = card_seen(bot_api)
    data = bot_api.button(card, "Confirm")
    stranger = bot_api.presses(CHAT, card.message_id, data)
    stranger["callback_query"]["message"]["chat"]["id"] = CHAT + 99  # the same data, pressed elsewhere
    updates.record(stranger)
    updates.record(bot_api.presses(CHAT, card.message_id, "made-up:y"))
    wait_until(lambda: len(bot_api.answers) == 2, what="both presses answered")
    assert {a.get("text") for a in bot_api.answers} == {"This button no longer works."}
    assert Confirmation.objects.get().status == "waiting" and not Note.objects.exists()


def test_a_rate_limit_is_waited_out(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer, endpoint: Any
) -> None:
    endpoint.supports_streaming = False  # the answer's own message is the one refused
    endpoint.save()
    model_server.push(answer("after the wait"))
    bot_api.limit("sendMessage", retry_after=1)
    says(bot_api, "hello")
    sent = reply_seen(bot_api, "after the wait")
    (refused,) = [c for c in bot_api.called("sendMessage") if c.refused]
    assert refused.params["text"] == "after the wait"
    assert sent.sent_at - refused.at >= 1.0


def test_an_update_delivered_twice_is_handled_once(
    linked: TelegramLink, bot_api: FakeBotApi, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("once"))
    update = bot_api.says(CHAT, "hello")
    assert updates.record(update) is True
    assert updates.record(update) is False
    wait_ended(last_turn())
    reply_seen(bot_api, "once")
    assert Turn.objects.count() == 1 and len(model_server.requests) == 1
