"""How updates arrive: Telegram POSTs them to the webhook (checked by its secret header, answered at once,
each update handled once), or one reader for the whole site polls, under a lease."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from agent.models import TelegramBot, TelegramUpdate
from agent.telegram import polling
from agent.turns import locks
from tests.support.telegram_api import FakeBotApi
from tests.support.waiting import wait_until

SECRET = "s3cret-token_1"


def post(client: Client, update: dict[str, Any], secret: str | None = SECRET) -> Any:
    headers = {"HTTP_X_TELEGRAM_BOT_API_SECRET_TOKEN": secret} if secret is not None else {}
    return client.post(
        reverse("agent:telegram_webhook"), json.dumps(update), content_type="application/json", **headers
    )


@pytest.fixture
def webhook_mode(bot_api: FakeBotApi, settings: Any) -> FakeBotApi:
    settings.AGENT = {**settings.AGENT, "TELEGRAM": bot_api.settings(MODE="webhook", SECRET=SECRET)}
    return bot_api


@pytest.mark.django_db
def test_the_webhook_refuses_a_wrong_or_missing_secret_and_records_nothing(webhook_mode: FakeBotApi) -> None:
    client = Client()
    update = webhook_mode.says(9001, "hello")
    assert post(client, update, secret="wrong").status_code == 403
    assert post(client, update, secret=None).status_code == 403
    assert not TelegramUpdate.objects.exists()


@pytest.mark.django_db
def test_the_webhook_records_an_update_once_and_answers_at_once(
    webhook_mode: FakeBotApi, django_capture_on_commit_callbacks: Any
) -> None:
    client = Client()
    update = webhook_mode.says(9001, "hello")
    with django_capture_on_commit_callbacks() as queued:
        assert post(client, update).status_code == 200
        assert post(client, update).status_code == 200  # Telegram sent it again: answered, not queued again
    assert len(queued) == 1
    row = TelegramUpdate.objects.get()
    assert row.update_id == update["update_id"] and row.payload == update and row.handled_at is None


@pytest.mark.django_db
def test_the_webhook_is_not_there_while_telegram_is_off_or_polls(bot_api: FakeBotApi, settings: Any) -> None:
    client = Client()
    assert post(client, bot_api.says(9001, "hi")).status_code == 404  # the fixture's site polls
    settings.AGENT = {**settings.AGENT, "TELEGRAM": None}
    assert post(client, bot_api.says(9001, "hi")).status_code == 404
    assert client.get(reverse("agent:telegram_webhook")).status_code == 405


@pytest.mark.django_db
def test_a_handled_update_is_never_handled_again(webhook_mode: FakeBotApi) -> None:
    from agent.telegram import updates

    update = webhook_mode.says(9001, "hello")
    updates.record(update)
    updates.handle(update["update_id"])
    updates.handle(update["update_id"])
    assert webhook_mode.texts(9001) == [webhook_mode.texts(9001)[0]]  # one "not connected" answer
    assert TelegramUpdate.objects.get().payload is None  # the body goes once it is handled


@pytest.mark.django_db
def test_the_webhook_command_gives_telegram_the_url_and_the_secret(webhook_mode: FakeBotApi) -> None:
    call_command("telegram_webhook", "https://example.com/assistant/telegram/webhook/")
    assert webhook_mode.webhook is not None
    assert webhook_mode.webhook["url"] == "https://example.com/assistant/telegram/webhook/"
    assert webhook_mode.webhook["secret_token"] == SECRET
    call_command("telegram_webhook", delete=True)
    assert webhook_mode.webhook is None


@pytest.mark.django_db(transaction=True)
def test_one_reader_polls_however_many_processes_try(bot_api: FakeBotApi) -> None:
    stop = threading.Event()
    readers = [threading.Thread(target=polling.run, args=(stop,), daemon=True) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        sent = [bot_api.says(9001, f"message {n}") for n in range(3)]
        wait_until(lambda: TelegramUpdate.objects.count() == 3, what="the updates recorded")
        wait_until(lambda: len(bot_api.called("getUpdates")) >= 4, what="more polls")
    finally:
        stop.set()
        for reader in readers:
            reader.join(timeout=15)
    assert bot_api.most_polling_at_once == 1 and bot_api.conflicts == 0
    assert sorted(TelegramUpdate.objects.values_list("update_id", flat=True)) == [u["update_id"] for u in sent]
    assert TelegramBot.current().offset == sent[-1]["update_id"] + 1
    assert not locks.Lock.objects.filter(name=locks.TELEGRAM_READER).exists()  # let go when stopped


@pytest.mark.django_db(transaction=True)
def test_a_new_reader_goes_on_from_the_kept_offset(bot_api: FakeBotApi) -> None:
    first = bot_api.says(9001, "before")
    assert polling.poll_once(timeout=0) == 1
    bot_api.says(9001, "after")
    assert polling.poll_once(timeout=0) == 1  # "before" is not read again
    assert TelegramUpdate.objects.count() == 2
    assert TelegramBot.current().offset == first["update_id"] + 2


@pytest.mark.django_db(transaction=True)
def test_a_reader_waits_out_a_rate_limit(bot_api: FakeBotApi) -> None:
    bot_api.limit("getUpdates", retry_after=1)
    bot_api.says(9001, "hello")
    stop = threading.Event()
    reader = threading.Thread(target=polling.run, args=(stop,), daemon=True)
    reader.start()
    try:
        wait_until(lambda: TelegramUpdate.objects.exists(), timeout=10, what="the update after the wait")
    finally:
        stop.set()
        reader.join(timeout=15)
    first, second = bot_api.called("getUpdates")[:2]
    assert first.refused and second.at - first.at >= 1.0
    assert TelegramBot.current().last_error == "rate_limited"


@pytest.mark.django_db
@pytest.mark.parametrize("update_id", [2**63, -(2**63) - 1, 10**30, True], ids=["2^63", "below", "huge", "bool"])
def test_an_update_id_no_column_holds_is_answered_200_and_recorded_never(
    webhook_mode: FakeBotApi, update_id: Any
) -> None:
    update = {**webhook_mode.says(9001, "hello"), "update_id": update_id}
    assert post(Client(), update).status_code == 200
    assert not TelegramUpdate.objects.exists()


@pytest.mark.django_db
def test_the_largest_update_id_a_column_holds_is_recorded(webhook_mode: FakeBotApi) -> None:
    update = {**webhook_mode.says(9001, "hello"), "update_id": 2**63 - 1}
    assert post(Client(), update).status_code == 200
    assert TelegramUpdate.objects.get().update_id == 2**63 - 1
