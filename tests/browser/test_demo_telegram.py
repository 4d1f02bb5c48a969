"""The demo as a user meets it in Telegram: ``manage.py demo`` with its bot pointed at a fake Bot API on
loopback. The user connects Telegram from "My assistant" in Chromium, asks for a note by text and by voice
(heard by the demo's offline recognizer), confirms the cards in Telegram, sees the same chat live on the
web page, and disconnects; after that the bot no longer answers for them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.support.live_site import log_tail, start, stop, wait_for_port
from tests.support.telegram_api import BOT, TOKEN, FakeBotApi, Sent
from tests.support.waiting import free_port, wait_until

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
SPOKEN = ROOT / "tests" / "fixtures" / "speech" / "create-a-note-buy-milk.oga"
CHAT = 31337


@pytest.fixture
def bot_api() -> Iterator[FakeBotApi]:
    api = FakeBotApi()
    api.start()
    yield api
    api.stop()


@pytest.fixture
def demo(tmp_path: Path, bot_api: FakeBotApi) -> Iterator[str]:
    """``DEBUG=true manage.py demo`` on a fresh SQLite file, its bot on the fake Bot API."""
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DJANGO_SETTINGS_MODULE", "REDIS_URL", "CELERY_BROKER_URL", "AGENT_TEST_QUEUE")
    }
    env |= {
        "DEBUG": "true",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "TELEGRAM_TOKEN": TOKEN,
        "TELEGRAM_BOT_USERNAME": BOT["username"],
        "TELEGRAM_BASE_URL": bot_api.base_url,
    }
    log = tmp_path / "demo.log"
    process = start(
        [sys.executable, "manage.py", "demo", "--addrport", f"127.0.0.1:{port}"], log=log, cwd=ROOT, env=env
    )
    try:
        wait_for_port(port, process, log, timeout=90)
        assert "Telegram: reading updates" in log_tail(log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


@pytest.fixture
def tab(chromium: Any, demo: str) -> Iterator[Page]:
    context = chromium.new_context(base_url=demo, locale="en-US", viewport={"width": 390, "height": 844})
    page = context.new_page()
    yield page
    context.close()


def bot_says(api: FakeBotApi, text: str, timeout: float = 60) -> Sent:
    return wait_until(
        lambda: next((m for m in api.chat(CHAT) if text in m.text), None),
        timeout,
        f"the bot to say {text!r}",
        why=lambda: repr(api.texts(CHAT)),
    )


def confirm_card(api: FakeBotApi, before: int) -> Sent:
    """Press Confirm on the newest card (one after the first ``before`` messages) and wait for it to be done."""
    card = wait_until(
        lambda: next((m for m in api.chat(CHAT)[before:] if m.buttons), None),
        60,
        "a card in Telegram",
        why=lambda: repr(api.texts(CHAT)),
    )
    api.presses(CHAT, card.message_id, api.button(card, "Confirm"))
    wait_until(lambda: "Done" in api.messages[(CHAT, card.message_id)].text, 60, "the card done")
    return card


def test_a_demo_user_talks_to_the_assistant_in_telegram_and_on_the_page(tab: Page, bot_api: FakeBotApi) -> None:
    tab.goto("/accounts/login/?next=/assistant/assistant/")
    tab.fill("#id_username", "demo")
    tab.fill("#id_password", "demo")
    tab.click(".login-form button[type=submit]")
    # connects Telegram from "My assistant"
    tab.click("#telegram-connect")
    link = tab.locator("#telegram-open")
    expect(link).to_be_visible()
    href = link.get_attribute("href") or ""
    assert href.startswith("https://t.me/agent_test_bot?start=")
    bot_api.says(CHAT, "/start " + href.split("start=")[1])
    bot_says(bot_api, "Connected")
    tab.reload()
    expect(tab.locator("#telegram-links li")).to_have_count(1)

    # asks for a note by text and confirms its card in Telegram
    before = len(bot_api.chat(CHAT))
    bot_api.says(CHAT, "create a note: Buy milk")
    confirm_card(bot_api, before)

    # and by voice
    before = len(bot_api.chat(CHAT))
    bot_api.sends_voice(CHAT, SPOKEN.read_bytes(), duration=3)
    bot_says(bot_api, "🎤 create a note buy milk")
    confirm_card(bot_api, before)

    # the same chat is on the web page, live
    tab.goto("/assistant/")
    tab.click("#toggle-sidebar")  # a phone shows the chats on demand
    tab.locator(".chat-link").first.click()
    expect(tab.locator("#message-log")).to_contain_text("create a note: Buy milk")
    expect(tab.locator("#message-log .msg-user", has_text="create a note buy milk")).to_contain_text("Spoken")
    bot_api.says(CHAT, "find notes about milk")
    expect(tab.locator("#message-log")).to_contain_text("find notes about milk", timeout=30_000)
    bot_says(bot_api, "Buy milk")

    # disconnecting stops it
    tab.goto("/assistant/assistant/")
    tab.locator("#telegram-links button").click()
    expect(tab.locator("#telegram-links li")).to_have_count(0)
    bot_api.says(CHAT, "create a note: call mom")
    bot_says(bot_api, "not connected")
