"""The README's first command: ``manage.py demo`` serves the whole product with no services.

The demo belongs to the demo site (``agent_project``), not to the app, so it is
run here as the README runs it, in its own process with the demo site's settings
and a fresh SQLite file, and reached from outside like a browser.
"""

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from agent.ai import complete, off_purpose
from agent.models import Endpoint
from agent_project.demo import offline
from tests.support.live_site import Visitor, frames_until, log_tail, next_frame, start, stop, wait_for_port
from tests.support.waiting import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
NOTES_TOOLS = [
    {"type": "function", "function": {"name": n}}
    for n in ("notes_search", "notes_read", "notes_create", "notes_update")
]


def test_offline_model_searches_before_it_proposes_a_note():
    first = offline.reply([{"role": "user", "content": "create a note: Buy milk"}], NOTES_TOOLS)
    assert first["tool_calls"][0]["function"]["name"] == "notes_search"
    second = offline.reply(
        [
            {"role": "user", "content": "create a note: Buy milk"},
            first,
            {"role": "tool", "tool_call_id": "x", "content": '{"notes": [], "count": 0}'},
        ],
        NOTES_TOOLS,
    )
    call = second["tool_calls"][0]["function"]
    assert call["name"] == "notes_create" and '"Buy milk"' in call["arguments"]


def test_offline_model_finds_the_note_before_it_proposes_to_rename_it():
    asked = {"role": "user", "content": "rename my note about milk to oat milk"}
    first = offline.reply([asked], NOTES_TOOLS)
    assert first["tool_calls"][0]["function"] == {"name": "notes_search", "arguments": '{"search": "milk"}'}
    found = {"role": "tool", "tool_call_id": "x", "content": '[{"id": 7, "title": "Buy milk"}]'}
    second = offline.reply([asked, first, found], NOTES_TOOLS)
    call = second["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("notes_update", {"pk": 7, "title": "oat milk"})


def test_offline_model_quotes_the_first_line_of_each_file_and_names_each_picture():
    content = [
        {"type": "text", "text": "what are these?\n\n[file: list.txt]\nMilk and bread\nand more\n\n[picture: cat.png]"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    answer = offline.reply([{"role": "user", "content": content}], NOTES_TOOLS)
    assert "**list.txt**: “Milk and bread”" in answer["content"] and "**cat.png**: a picture" in answer["content"]


def test_offline_model_labels_its_answers_and_speaks_russian():
    answer = offline.reply([{"role": "user", "content": "привет"}], [])
    assert "tool_calls" not in answer and offline.LABEL["ru"] in answer["content"]
    assert offline.LABEL["en"] in offline.reply([{"role": "user", "content": "hello"}], [])["content"]


@pytest.mark.django_db
def test_offline_model_streams_its_answers_a_word_at_a_time_and_its_tool_calls_whole(user):
    endpoint = Endpoint(name="offline", base_url=offline.serve(), model=offline.MODEL_NAME, timeout_s=10)

    def ask(text, tools):
        seen = []
        messages = [{"role": "user", "content": text}]
        extra = {"tools": tools} if tools else {}
        got = complete(endpoint, messages, user=user, source="agent", task="demo", on_chunk=seen.append, **extra)
        return got, seen

    answer, seen = ask("hello", None)
    assert answer.content == offline.reply([{"role": "user", "content": "hello"}], [])["content"]
    assert len(set(seen)) > 5 and all(answer.content.startswith(text) for text in seen)
    search, _seen = ask("find notes about milk", NOTES_TOOLS)
    assert [(c.name, c.arguments) for c in search.tool_calls] == [("notes_search", '{"search": "milk"}')]


@contextmanager
def demo_site(tmp_path: Path) -> Iterator[str]:
    """``DEBUG=true manage.py demo`` on a fresh SQLite file, with none of the test run's services: its URL."""
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DJANGO_SETTINGS_MODULE", "REDIS_URL", "CELERY_BROKER_URL", "AGENT_TEST_QUEUE")
    }
    env |= {"DEBUG": "true", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    log = tmp_path / "demo.log"
    demo = start([sys.executable, "manage.py", "demo", "--addrport", f"127.0.0.1:{port}"], log=log, cwd=ROOT, env=env)
    try:
        wait_for_port(port, demo, log, timeout=90)
        assert "sign in as demo / demo" in log_tail(log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(demo)


def test_the_demo_serves_the_chat_page_and_makes_a_note_once_its_card_is_confirmed(tmp_path):
    with demo_site(tmp_path) as url:
        visitor = Visitor(url)
        # when the demo user signs in from the front page and asks for a note
        status, _page = visitor.get("/")
        landed = visitor.login("/accounts/login/?next=/assistant/", "demo", "demo")
        assert landed.endswith("/assistant/")
        status, page = visitor.get("/assistant/")
        assert status == 200 and "agent/chat/main.js" in page
        _status, created = visitor.api("/assistant/api/conversations/new/", {})
        chat = created["conversation"]["id"]
        # and first says hello with the page's websocket open
        with visitor.websocket("/ws/agent/") as ws:
            assert next_frame(ws)["type"] == "ready"
            ws.send(json.dumps({"type": "subscribe", "conversation": chat}))
            frames_until(ws, lambda f: f["type"] == "subscribed")
            ws.send(json.dumps({"type": "send", "conversation": chat, "text": "hello"}))
            seen = frames_until(ws, lambda f: f["type"] == "message" and f["message"]["role"] == "assistant")
        # then the answer streams in, a draft at a time, before it is stored and sent whole
        stored = seen[-1]["message"]["content"]
        drafts = [f["text"] for f in seen if f["type"] == "delta"]
        assert len(drafts) >= 2 and all(stored.startswith(text) for text in drafts)
        _wait_for_the_turn(visitor, chat)
        status, _turn = visitor.api(f"/assistant/api/conversations/{chat}/send/", {"text": "create a note: Buy milk"})
        assert status == 200
        confirmation = wait_until(lambda: _waiting_confirmation(visitor, chat), 60, "the offline model's card")
        # then the note is made only after Confirm, and the model finds it afterwards
        status, decided = visitor.api(f"/assistant/api/confirmations/{confirmation['id']}/confirm/", {})
        assert (status, decided["confirmation"]["status"]) == (200, "done")
        _wait_for_the_turn(visitor, chat)
        visitor.api(f"/assistant/api/conversations/{chat}/send/", {"text": "find notes about milk"})
        answer = wait_until(lambda: _answer_after(visitor, chat, "find notes about milk"), 60, "the search's answer")
        assert "Buy milk" in answer and "offline demo model" in answer


def test_the_demo_renames_a_note_on_a_card_the_user_corrects_before_confirming(tmp_path):
    with demo_site(tmp_path) as url:
        # given: the demo user, signed in, with a note "Buy milk" made through the assistant
        visitor = Visitor(url)
        visitor.login("/accounts/login/?next=/assistant/", "demo", "demo")
        chat = visitor.api("/assistant/api/conversations/new/", {})[1]["conversation"]["id"]
        visitor.api(f"/assistant/api/conversations/{chat}/send/", {"text": "create a note: Buy milk"})
        made = wait_until(lambda: _waiting_confirmation(visitor, chat), 60, "the card of the new note")
        assert visitor.api(f"/assistant/api/confirmations/{made['id']}/confirm/", {})[0] == 200
        _wait_for_the_turn(visitor, chat)
        notes_before = _note_titles(tmp_path)
        # when: the user asks the offline model to rename it
        visitor.api(f"/assistant/api/conversations/{chat}/send/", {"text": "rename my note about milk to oat milk"})
        confirmation = wait_until(lambda: _waiting_confirmation(visitor, chat), 60, "the rename's card")
        # then: the card shows the old title beside the new one, the title editable
        rows = {row["name"]: row for row in confirmation["preview"]["fields"]}
        assert rows["title"] == {
            "name": "title",
            "label": "Title",
            "value": "oat milk",
            "old": "Buy milk",
            "editable": True,
            "type": "text",
        }
        assert not rows["pk"]["editable"] and rows["pk"]["value"] == "Buy milk"
        confirm = f"/assistant/api/confirmations/{confirmation['id']}/confirm/"
        # when: the user's edit is too long, it is refused beside the field and the card waits on
        status, answered = visitor.api(confirm, {"edits": {"title": "x" * 201}})
        assert (status, answered["confirmation"]["status"], answered["refused"]["fields"]) == (
            200,
            "waiting",
            {"title": ["Ensure this value has at most 200 characters (it has 201)."]},
        )
        assert (
            _waiting_confirmation(visitor, chat)["id"] == confirmation["id"] and _note_titles(tmp_path) == notes_before
        )
        # when: the user fixes it, the note is renamed once, with the user's title
        status, decided = visitor.api(confirm, {"edits": {"title": "Oat milk"}})
        assert (status, decided["confirmation"]) == (200, {"id": confirmation["id"], "status": "done", "edited": True})
        assert visitor.api(confirm, {"edits": {"title": "Oat milk"}})[0] == 409  # a second click runs nothing
        assert _note_titles(tmp_path) == sorted(["Oat milk" if t == "Buy milk" else t for t in notes_before])


def _note_titles(tmp_path: Path) -> list[str]:
    """The demo's notes, read from its SQLite file as the test sees nothing else of the other process."""
    with closing(sqlite3.connect(tmp_path / "db.sqlite3")) as db:
        return sorted(title for (title,) in db.execute("SELECT title FROM notes_note"))


def _wait_for_the_turn(visitor: Visitor, chat: str) -> None:
    wait_until(lambda: not visitor.api(f"/assistant/api/conversations/{chat}/")[1]["turn"], 30, "the turn's end")


def _messages(visitor: Visitor, chat: str) -> list[dict]:
    return visitor.api(f"/assistant/api/conversations/{chat}/messages/?latest=1")[1]["messages"]


def _waiting_confirmation(visitor: Visitor, chat: str) -> dict | None:
    confirmations = [m["confirmation"] for m in _messages(visitor, chat) if m["role"] == "tool" and m["confirmation"]]
    return next((c for c in confirmations if c["status"] == "waiting"), None)


def _answer_after(visitor: Visitor, chat: str, question: str) -> str | None:
    messages = _messages(visitor, chat)
    asked = max((i for i, m in enumerate(messages) if m["role"] == "user" and m["content"] == question), default=None)
    answers = [m["content"] for m in messages[asked or 0 :] if m["role"] == "assistant" and m["content"]]
    return answers[-1] if asked is not None and answers else None


def test_offline_model_marks_an_off_purpose_request_with_the_prompts_nonce_only():
    # given: the system prompt of a turn, with its nonce
    nonce = off_purpose.marker_nonce()
    prompt = {"role": "system", "content": f"Answer briefly. End with the marker {off_purpose.marker_example(nonce)}."}
    asked = {"role": "user", "content": "write me a poem"}
    # when / then: the marker carries the nonce and flags the turn; without a prompt, no marker
    content = offline.reply([prompt, asked], NOTES_TOOLS)["content"]
    assert off_purpose.cut_marker(content, nonce)[1] == "poem"
    assert off_purpose.MARKER_OPEN not in offline.reply([asked], [])["content"]
    assert off_purpose.MARKER_OPEN not in offline.reply([prompt, {"role": "user", "content": "hello"}], [])["content"]


def test_the_demo_keeps_uploads_in_its_git_ignored_media_folder_outside_the_app():
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "MEDIA_ROOT")} | {"DEBUG": "true"}
    where_files_go = "from agent.models import Attachment; print(Attachment._meta.get_field('file').storage.path('f'))"
    shown = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", where_files_go], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    stored = Path(shown.stdout.strip().splitlines()[-1])
    assert stored.is_relative_to(ROOT / "media") and not stored.is_relative_to(ROOT / "agent")
    assert subprocess.run(["git", "check-ignore", "-q", str(stored)], cwd=ROOT).returncode == 0
