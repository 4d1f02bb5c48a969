"""The composer's microphone in Chromium, with Chromium's fake microphone playing a spoken request: the
recording goes to the speech endpoint (the demo's offline recognizer, a real one) and its words land in
the message box to be read before sending; nothing is sent on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from playwright.sync_api import Page, expect

from agent.models import AgentSettings, Endpoint, Message
from agent_project.demo import offline
from tests.support.browser import ARTIFACTS, AsgiServer, chromium_browser, sign_in
from tests.support.factories import EndpointFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SPOKEN = Path(__file__).resolve().parents[1] / "fixtures" / "speech" / "create-a-note-buy-milk.wav"


@pytest.fixture(scope="module")
def microphone_browser() -> Iterator[Any]:
    """Chromium whose microphone plays the fixture once, allowed without asking."""
    with chromium_browser(
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={SPOKEN}%noloop",
    ) as browser:
        yield browser


@pytest.fixture
def speech(endpoint: Endpoint) -> Endpoint:
    row = EndpointFactory(
        name="offline ears",
        base_url=offline.serve(),
        model=offline.MODEL_NAME,
        supports_transcription=True,
        timeout_s=30,
    )
    AgentSettings.objects.update(speech_endpoint=row)
    return row


@pytest.fixture
def mic_tab(microphone_browser: Any, asgi_server: AsgiServer, worker: Any, request: Any) -> Iterator[Page]:
    context = microphone_browser.new_context(
        base_url=asgi_server.url, locale="en-US", viewport={"width": 390, "height": 844}
    )
    broken: list[str] = []
    context.on("weberror", lambda error: broken.append(f"uncaught: {error.error}"))
    context.on("console", lambda message: "Content Security Policy" in message.text and broken.append(message.text))
    tab = context.new_page()
    yield tab
    if getattr(request.node, "report_call", None) is not None and request.node.report_call.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert broken == [], "the page broke its policy or threw"


def test_speaking_puts_the_words_in_the_message_box_to_read_before_sending(
    mic_tab: Page, user: Any, speech: Endpoint
) -> None:
    sign_in(mic_tab, user)
    record = mic_tab.locator("#record")
    expect(record).to_be_visible()
    record.click()
    expect(record).to_have_attribute("aria-pressed", "true")
    expect(mic_tab.locator("#voice-status")).to_contain_text("Recording 0:0")
    mic_tab.wait_for_timeout(4500)  # the fixture's words, and a moment of silence after them
    record.click()
    expect(mic_tab.locator("#composer-text")).to_have_value("create a note buy milk", timeout=30_000)
    expect(record).to_have_attribute("aria-pressed", "false")
    assert not Message.objects.exists()  # in the box, not sent


def test_without_a_speech_model_there_is_no_microphone(mic_tab: Page, user: Any, endpoint: Endpoint) -> None:
    sign_in(mic_tab, user)
    expect(mic_tab.locator("#record")).to_be_hidden()
